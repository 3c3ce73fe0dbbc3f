package jute

import (
	"errors"
	"fmt"
)

// Request is any client request after the handshake: the header and the
// fields of the record its opcode carries. Fields an opcode does not use
// stay zero.
type Request struct {
	Xid int32
	Op  int32

	Path    string
	Data    []byte
	ACL     []ACL
	Flags   int32 // create mode
	TTL     int64 // createTTL
	Version int32 // expected version (delete, setData, setACL, check)
	Watch   bool  // exists, getData, getChildren(2)
	Mode    int32 // watcher type (check/removeWatches) or addWatch mode

	// setWatches (101) and setWatches2 (105)
	RelativeZxid     int64
	DataWatches      []string
	ExistWatches     []string
	ChildWatches     []string
	PersistWatches   []string
	RecursiveWatches []string

	// auth (100)
	AuthType int32
	Scheme   string
	Auth     []byte

	// sasl (102): GetSASLRequest's token
	Token []byte

	// multi (14) and multiRead (22)
	Ops []Request

	// reconfig (16)
	Joining, Leaving, Members string
	ConfigID                  int64
}

// Known reports whether the opcode is one this package can decode.
func Known(op int32) bool {
	switch op {
	case OpCreate, OpDelete, OpExists, OpGetData, OpSetData, OpGetACL, OpSetACL,
		OpGetChildren, OpSync, OpPing, OpGetChildren2, OpCheck, OpMulti, OpCreate2,
		OpReconfig, OpCheckWatches, OpRemoveWatches, OpCreateContainer, OpCreateTTL,
		OpMultiRead, OpAuth, OpSetWatches, OpSASL, OpGetEphemerals, OpGetAllChildrenNumber,
		OpSetWatches2, OpAddWatch, OpWhoAmI, OpCloseSession:
		return true
	}
	return false
}

// ErrBadRecord reports a request whose header was read but whose record
// was malformed; ZooKeeper answers such a request with MarshallingError.
var ErrBadRecord = errors.New("jute: malformed request record")

// DecodeRequest decodes a request frame's payload. A request with an
// opcode Known does not report is returned with only its header; the
// caller answers it with ErrUnimplemented. Bytes after the record are
// ignored, as ZooKeeper does.
func DecodeRequest(p []byte) (Request, error) {
	d := NewDecoder(p)
	var r Request
	r.Xid, r.Op = d.Int32(), d.Int32()
	if d.err != nil {
		return r, fmt.Errorf("jute: request header: %w", d.err)
	}
	if Known(r.Op) {
		r.decodeBody(d, 0)
	}
	if d.err != nil {
		return r, fmt.Errorf("%w: type %d: %w", ErrBadRecord, r.Op, d.err)
	}
	return r, nil
}

func (r *Request) decodeBody(d *Decoder, depth int) {
	switch r.Op {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
		r.Path, r.Data, r.ACL, r.Flags = d.String(), d.Buffer(), DecodeACLs(d), d.Int32()
		if r.Op == OpCreateTTL {
			r.TTL = d.Int64()
		}
	case OpDelete, OpCheck:
		r.Path, r.Version = d.String(), d.Int32()
	case OpExists, OpGetData, OpGetChildren, OpGetChildren2:
		r.Path, r.Watch = d.String(), d.Bool()
	case OpSetData:
		r.Path, r.Data, r.Version = d.String(), d.Buffer(), d.Int32()
	case OpGetACL, OpSync, OpGetEphemerals, OpGetAllChildrenNumber:
		r.Path = d.String()
	case OpSetACL:
		r.Path, r.ACL, r.Version = d.String(), DecodeACLs(d), d.Int32()
	case OpCheckWatches, OpRemoveWatches, OpAddWatch:
		r.Path, r.Mode = d.String(), d.Int32()
	case OpAuth:
		r.AuthType, r.Scheme, r.Auth = d.Int32(), d.String(), d.Buffer()
	case OpSASL:
		r.Token = d.Buffer()
	case OpSetWatches, OpSetWatches2:
		r.RelativeZxid = d.Int64()
		r.DataWatches, r.ExistWatches, r.ChildWatches = d.Strings(), d.Strings(), d.Strings()
		if r.Op == OpSetWatches2 {
			r.PersistWatches, r.RecursiveWatches = d.Strings(), d.Strings()
		}
	case OpReconfig:
		r.Joining, r.Leaving, r.Members, r.ConfigID = d.String(), d.String(), d.String(), d.Int64()
	case OpMulti, OpMultiRead:
		if depth > 0 {
			d.fail(fmt.Errorf("jute: nested multi"))
			return
		}
		r.decodeOps(d)
	}
}

// decodeOps reads the operations of a multi up to the end marker.
func (r *Request) decodeOps(d *Decoder) {
	for d.err == nil {
		var h MultiHeader
		h.Decode(d)
		if h.Done {
			return
		}
		if !multiOp(r.Op, h.Type) {
			d.fail(fmt.Errorf("jute: operation type %d not allowed in multi type %d", h.Type, r.Op))
			return
		}
		op := Request{Op: h.Type}
		op.decodeBody(d, 1)
		r.Ops = append(r.Ops, op)
	}
}

// multiOp reports whether op may appear in a multi of type multi.
func multiOp(multi, op int32) bool {
	switch op {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL, OpDelete, OpSetData, OpCheck:
		return multi == OpMulti
	case OpGetChildren, OpGetData:
		return multi == OpMultiRead
	}
	return false
}

// Encode writes the request (header and record) to e.
func (r *Request) Encode(e *Encoder) {
	e.Int32(r.Xid)
	e.Int32(r.Op)
	r.encodeBody(e)
}

func (r *Request) encodeBody(e *Encoder) {
	switch r.Op {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
		e.String(r.Path)
		e.Buffer(r.Data)
		EncodeACLs(e, r.ACL)
		e.Int32(r.Flags)
		if r.Op == OpCreateTTL {
			e.Int64(r.TTL)
		}
	case OpDelete, OpCheck:
		e.String(r.Path)
		e.Int32(r.Version)
	case OpExists, OpGetData, OpGetChildren, OpGetChildren2:
		e.String(r.Path)
		e.Bool(r.Watch)
	case OpSetData:
		e.String(r.Path)
		e.Buffer(r.Data)
		e.Int32(r.Version)
	case OpGetACL, OpSync, OpGetEphemerals, OpGetAllChildrenNumber:
		e.String(r.Path)
	case OpSetACL:
		e.String(r.Path)
		EncodeACLs(e, r.ACL)
		e.Int32(r.Version)
	case OpCheckWatches, OpRemoveWatches, OpAddWatch:
		e.String(r.Path)
		e.Int32(r.Mode)
	case OpAuth:
		e.Int32(r.AuthType)
		e.String(r.Scheme)
		e.Buffer(r.Auth)
	case OpSASL:
		e.Buffer(r.Token)
	case OpSetWatches, OpSetWatches2:
		e.Int64(r.RelativeZxid)
		e.Strings(orEmpty(r.DataWatches))
		e.Strings(orEmpty(r.ExistWatches))
		e.Strings(orEmpty(r.ChildWatches))
		if r.Op == OpSetWatches2 {
			e.Strings(orEmpty(r.PersistWatches))
			e.Strings(orEmpty(r.RecursiveWatches))
		}
	case OpReconfig:
		// ZooKeeper tells the two kinds of reconfig apart by null: a
		// non-null newMembers is a bulk change, even when empty. So an
		// empty field goes as null.
		e.NullString(r.Joining)
		e.NullString(r.Leaving)
		e.NullString(r.Members)
		e.Int64(r.ConfigID)
	case OpMulti, OpMultiRead:
		for i := range r.Ops {
			h := MultiHeader{Type: r.Ops[i].Op, Err: -1}
			h.Encode(e)
			r.Ops[i].encodeBody(e)
		}
		end := MultiHeader{Type: -1, Done: true, Err: -1}
		end.Encode(e)
	}
}

func orEmpty(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}
