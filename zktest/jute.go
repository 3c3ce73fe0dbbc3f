package zktest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ZooKeeper's wire format is jute: big-endian integers, and byte buffers
// and strings prefixed by an int32 length. Every packet is framed by an
// int32 length.

// maxFrame bounds the frames this package reads; ZooKeeper's own limit
// (jute.maxbuffer) defaults to 1 MiB.
const maxFrame = 64 << 20

// opCloseSession is the operation code of a closeSession request.
const opCloseSession = -11

// encoder appends jute values to a frame whose length is filled in by
// frame.
type encoder struct{ b []byte }

func newEncoder() *encoder { return &encoder{b: make([]byte, 4, 64)} }

func (e *encoder) int32(v int32)   { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *encoder) int64(v int64)   { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *encoder) byte(v byte)     { e.b = append(e.b, v) }
func (e *encoder) string(s string) { e.buffer([]byte(s)) }

func (e *encoder) buffer(p []byte) {
	e.int32(int32(len(p)))
	e.b = append(e.b, p...)
}

// frame returns the encoded frame, length prefix included.
func (e *encoder) frame() []byte {
	binary.BigEndian.PutUint32(e.b, uint32(len(e.b)-4))
	return e.b
}

// decoder reads jute values from a frame's payload. After the first
// error every read returns zero values and err reports it.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("short ZooKeeper packet")

func (d *decoder) next(n int) []byte {
	if d.err != nil || n < 0 || len(d.b) < n {
		if d.err == nil {
			d.err = errShort
		}
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) int32() int32 {
	if p := d.next(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (d *decoder) int64() int64 {
	if p := d.next(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

// buffer reads a length-prefixed buffer; a negative length is a null
// buffer.
func (d *decoder) buffer() []byte {
	n := d.int32()
	if n <= 0 {
		return nil
	}
	return append([]byte(nil), d.next(int(n))...)
}

// readFrame reads one length-prefixed frame and returns its payload.
func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, fmt.Errorf("ZooKeeper frame of %d bytes is too large", n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, err
	}
	return p, nil
}
