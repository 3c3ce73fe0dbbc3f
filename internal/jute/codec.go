// Package jute encodes and decodes the ZooKeeper wire format: frames
// prefixed by a 4-byte big-endian length holding jute records made of
// big-endian int32 and int64 values, one-byte booleans, and strings,
// buffers and vectors prefixed by an int32 length where -1 means null.
package jute

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxFrame is the largest frame ZooKeeper accepts by default
// (jute.maxbuffer, 1 MiB - 1).
const MaxFrame = 0xfffff

// ErrShort reports a record that ends before all its fields were read.
var ErrShort = errors.New("jute: record too short")

// ErrFrameSize reports a frame length below zero or above the limit.
var ErrFrameSize = errors.New("jute: bad frame length")

// Encoder appends jute values to a byte slice.
type Encoder struct {
	b []byte
}

// NewFrameEncoder returns an Encoder whose output starts with room for a
// frame length, filled in by Frame.
func NewFrameEncoder() *Encoder { return &Encoder{b: make([]byte, 4, 64)} }

// Int32 appends a big-endian int32.
func (e *Encoder) Int32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }

// Int64 appends a big-endian int64.
func (e *Encoder) Int64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }

// Bool appends a boolean as one byte.
func (e *Encoder) Bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

// Buffer appends a length-prefixed buffer; nil is written as null (-1).
func (e *Encoder) Buffer(p []byte) {
	if p == nil {
		e.Int32(-1)
		return
	}
	e.Int32(int32(len(p)))
	e.b = append(e.b, p...)
}

// String appends a length-prefixed string.
func (e *Encoder) String(s string) {
	e.Int32(int32(len(s)))
	e.b = append(e.b, s...)
}

// NullString appends s, or null (-1) when s is empty: for the fields
// whose null ZooKeeper reads as "absent".
func (e *Encoder) NullString(s string) {
	if s == "" {
		e.Int32(-1)
		return
	}
	e.String(s)
}

// Strings appends a vector of strings; nil is written as null (-1).
func (e *Encoder) Strings(v []string) {
	if v == nil {
		e.Int32(-1)
		return
	}
	e.Int32(int32(len(v)))
	for _, s := range v {
		e.String(s)
	}
}

// Raw appends bytes as they are.
func (e *Encoder) Raw(p []byte) { e.b = append(e.b, p...) }

// Bytes returns what was appended so far.
func (e *Encoder) Bytes() []byte { return e.b }

// Frame fills in the length prefix of an Encoder made by NewFrameEncoder
// and returns the whole frame.
func (e *Encoder) Frame() []byte {
	binary.BigEndian.PutUint32(e.b, uint32(len(e.b)-4))
	return e.b
}

// Decoder reads jute values from a record. After the first error every
// read returns a zero value and Err reports the error.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder returns a Decoder reading p.
func NewDecoder(p []byte) *Decoder { return &Decoder{b: p} }

// Err returns the first error met, or nil.
func (d *Decoder) Err() error { return d.err }

// Len returns the number of bytes not read yet.
func (d *Decoder) Len() int { return len(d.b) }

// Rest returns the bytes not read yet.
func (d *Decoder) Rest() []byte { return d.b }

// Fail records err as the decoder's error, unless it has one already: a
// record reader that finds a value it cannot accept stops decoding so.
func (d *Decoder) Fail(err error) { d.fail(err) }

func (d *Decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *Decoder) next(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.fail(ErrShort)
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

// Int32 reads a big-endian int32.
func (d *Decoder) Int32() int32 {
	if p := d.next(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

// Int64 reads a big-endian int64.
func (d *Decoder) Int64() int64 {
	if p := d.next(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

// Bool reads a one-byte boolean.
func (d *Decoder) Bool() bool {
	if p := d.next(1); p != nil {
		return p[0] != 0
	}
	return false
}

// Buffer reads a length-prefixed buffer; null (-1) is returned as nil.
// The result is a copy.
func (d *Decoder) Buffer() []byte {
	n := d.Int32()
	if d.err != nil || n == -1 {
		return nil
	}
	if n < -1 {
		d.fail(fmt.Errorf("jute: negative length %d", n))
		return nil
	}
	p := d.next(int(n))
	if p == nil {
		return nil
	}
	return append(make([]byte, 0, n), p...)
}

// String reads a length-prefixed string; null reads as "".
func (d *Decoder) String() string {
	n := d.Int32()
	if d.err != nil || n == -1 {
		return ""
	}
	if n < -1 {
		d.fail(fmt.Errorf("jute: negative length %d", n))
		return ""
	}
	return string(d.next(int(n)))
}

// VectorLen reads a vector's element count, checking that at least
// minSize bytes per element remain; null (-1) reads as 0.
func (d *Decoder) VectorLen(minSize int) int {
	n := d.Int32()
	if d.err != nil || n == -1 {
		return 0
	}
	if n < -1 || int64(n)*int64(minSize) > int64(len(d.b)) {
		d.fail(fmt.Errorf("jute: bad vector length %d", n))
		return 0
	}
	return int(n)
}

// Strings reads a vector of strings; null reads as nil.
func (d *Decoder) Strings() []string {
	n := d.VectorLen(4)
	if n == 0 {
		return nil
	}
	v := make([]string, 0, n)
	for range n {
		v = append(v, d.String())
	}
	if d.err != nil {
		return nil
	}
	return v
}

// ReadFrame reads one frame from r and returns its payload. A length
// below zero or above max is an error wrapping ErrFrameSize.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	return ReadFrameBody(r, int32(binary.BigEndian.Uint32(hdr[:])), max)
}

// ReadFrameBody reads the payload of a frame whose length n was read
// already.
func ReadFrameBody(r io.Reader, n int32, max int) ([]byte, error) {
	if n < 0 || int(n) > max {
		return nil, fmt.Errorf("%w: %d", ErrFrameSize, n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, err
	}
	return p, nil
}

// AppendFrame appends r as one frame (length prefix, header and record)
// to dst and returns the extended slice.
func AppendFrame(dst []byte, r *Request) []byte {
	start := len(dst)
	e := Encoder{b: append(dst, 0, 0, 0, 0)}
	r.Encode(&e)
	binary.BigEndian.PutUint32(e.b[start:], uint32(len(e.b)-start-4))
	return e.b
}
