package zkserver

import (
	"bufio"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// On-disk format, version 1. A DataDir holds snapshots (snap.<zxid>) and
// transaction logs (log.<zxid>), zxid in 16 hex digits: the log holds the
// transactions after that zxid, the snapshot the sessions at that zxid
// and every node as it was at some moment after it. A snapshot is taken
// while writes go on, as ZooKeeper's are ("fuzzy"): each node is read
// whole, but not all at the same moment, so a loaded snapshot is brought
// up to date by replaying every transaction after its zxid. Replay is
// idempotent: each transaction record holds the final state of every
// node it touched. Both files are sequences of records: a 4-byte
// big-endian payload length, the payload's CRC-32 (IEEE), then the
// payload, whose first byte is the format version.
const (
	formatVersion = 1

	recTxn      = 1 // a transaction: zxid, closed session, node changes
	recSession  = 2 // createSession: zxid, id, timeout, password
	recSnapHead = 3 // snapshot header: zxid, then sessions, then nodes
	recSnapNode = 4 // one node of a snapshot
	recSnapSess = 5 // one session of a snapshot
)

// errTorn reports a record cut short or corrupted, as a crash mid-write
// leaves the end of a log.
var errTorn = errors.New("torn record")

// frameRecord appends payload to b as a length-prefixed, checksummed
// record.
func frameRecord(b, payload []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(payload))
	return append(b, payload...)
}

// readRecord reads one record's payload; io.EOF at a clean end, errTorn
// for a partial or corrupted record.
func readRecord(r *bufio.Reader) ([]byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, errTorn
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n == 0 || n > 1<<30 {
		return nil, errTorn
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, errTorn
	}
	if crc32.ChecksumIEEE(p) != binary.BigEndian.Uint32(hdr[4:]) || p[0] != formatVersion {
		return nil, errTorn
	}
	return p, nil
}

// encodeNode writes a node's own state (not its children).
func encodeNode(e *jute.Encoder, p string, n *node) {
	e.String(p)
	e.Buffer(n.data)
	jute.EncodeACLs(e, n.acl)
	n.stat.Encode(e)
	e.Int32(n.seq)
}

func decodeNode(d *jute.Decoder) (string, *node) {
	p := d.String()
	n := &node{data: d.Buffer()}
	n.acl = jute.DecodeACLs(d)
	n.stat.Decode(d)
	n.seq = d.Int32()
	return p, n
}

// Kinds of node change in a transaction record.
const (
	changeDeleted  = 0 // path
	changeNode     = 1 // the whole node (see encodeNode)
	changeStatOnly = 2 // path, stat, sequence counter
)

// txnRecord encodes a committed transaction as the final state of every
// node it touched, in the order it first touched them.
func (s *Server) txnRecord(x *txn) []byte {
	e := &jute.Encoder{}
	e.Raw([]byte{formatVersion, recTxn})
	e.Int64(x.zxid)
	e.Int64(x.closed)
	e.Int32(int32(len(x.touched)))
	for _, t := range x.touched {
		n := s.tree.nodes[t.path]
		switch {
		case n == nil:
			e.Int32(changeDeleted)
			e.String(t.path)
		case t.statOnly:
			e.Int32(changeStatOnly)
			e.String(t.path)
			n.stat.Encode(e)
			e.Int32(n.seq)
		default:
			e.Int32(changeNode)
			encodeNode(e, t.path, n)
		}
	}
	return e.Bytes()
}

func sessionRecord(zxid int64, sess *session) []byte {
	e := &jute.Encoder{}
	e.Raw([]byte{formatVersion, recSession})
	e.Int64(zxid)
	encodeSession(e, sess)
	return e.Bytes()
}

// encodeSession writes what a DataDir keeps of a session: its id,
// timeout and password.
func encodeSession(e *jute.Encoder, sess *session) {
	e.Int64(sess.id)
	e.Int64(int64(sess.timeout))
	e.Buffer(sess.passwd)
}

func decodeSession(d *jute.Decoder) *session {
	sess := &session{id: d.Int64(), timeout: time.Duration(d.Int64())}
	sess.passwd = d.Buffer()
	return sess
}
