package jute

// ConnectRequest opens or resumes a session.
type ConnectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    int64
	TimeOut         int32
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool
	HasReadOnly     bool // whether the client sent the readOnly byte
}

// Decode reads the request; the readOnly byte is optional.
func (r *ConnectRequest) Decode(d *Decoder) {
	r.ProtocolVersion = d.Int32()
	r.LastZxidSeen = d.Int64()
	r.TimeOut = d.Int32()
	r.SessionID = d.Int64()
	r.Passwd = d.Buffer()
	if d.err == nil && d.Len() > 0 {
		r.HasReadOnly = true
		r.ReadOnly = d.Bool()
	}
}

// Encode writes the request.
func (r *ConnectRequest) Encode(e *Encoder) {
	e.Int32(r.ProtocolVersion)
	e.Int64(r.LastZxidSeen)
	e.Int32(r.TimeOut)
	e.Int64(r.SessionID)
	e.Buffer(r.Passwd)
	if r.HasReadOnly {
		e.Bool(r.ReadOnly)
	}
}

// ConnectResponse answers a ConnectRequest.
type ConnectResponse struct {
	ProtocolVersion int32
	TimeOut         int32
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool
	HasReadOnly     bool
}

// Encode writes the response; the readOnly byte only if HasReadOnly.
func (r *ConnectResponse) Encode(e *Encoder) {
	e.Int32(r.ProtocolVersion)
	e.Int32(r.TimeOut)
	e.Int64(r.SessionID)
	e.Buffer(r.Passwd)
	if r.HasReadOnly {
		e.Bool(r.ReadOnly)
	}
}

// Decode reads the response; the readOnly byte is optional.
func (r *ConnectResponse) Decode(d *Decoder) {
	r.ProtocolVersion = d.Int32()
	r.TimeOut = d.Int32()
	r.SessionID = d.Int64()
	r.Passwd = d.Buffer()
	if d.err == nil && d.Len() > 0 {
		r.HasReadOnly = true
		r.ReadOnly = d.Bool()
	}
}

// RequestHeader starts every request after the handshake.
type RequestHeader struct {
	Xid  int32
	Type int32
}

// Decode reads the header.
func (h *RequestHeader) Decode(d *Decoder) { h.Xid, h.Type = d.Int32(), d.Int32() }

// Encode writes the header.
func (h *RequestHeader) Encode(e *Encoder) { e.Int32(h.Xid); e.Int32(h.Type) }

// ReplyHeader starts every reply and notification.
type ReplyHeader struct {
	Xid  int32
	Zxid int64
	Err  int32
}

// Decode reads the header.
func (h *ReplyHeader) Decode(d *Decoder) { h.Xid, h.Zxid, h.Err = d.Int32(), d.Int64(), d.Int32() }

// Encode writes the header.
func (h *ReplyHeader) Encode(e *Encoder) { e.Int32(h.Xid); e.Int64(h.Zxid); e.Int32(h.Err) }

// StatSize is the encoded size of a Stat.
const StatSize = 68

// Stat is a znode's metadata.
type Stat struct {
	Czxid          int64
	Mzxid          int64
	Ctime          int64
	Mtime          int64
	Version        int32
	Cversion       int32
	Aversion       int32
	EphemeralOwner int64
	DataLength     int32
	NumChildren    int32
	Pzxid          int64
}

// Encode writes the stat.
func (s *Stat) Encode(e *Encoder) {
	e.Int64(s.Czxid)
	e.Int64(s.Mzxid)
	e.Int64(s.Ctime)
	e.Int64(s.Mtime)
	e.Int32(s.Version)
	e.Int32(s.Cversion)
	e.Int32(s.Aversion)
	e.Int64(s.EphemeralOwner)
	e.Int32(s.DataLength)
	e.Int32(s.NumChildren)
	e.Int64(s.Pzxid)
}

// Decode reads the stat.
func (s *Stat) Decode(d *Decoder) {
	s.Czxid, s.Mzxid, s.Ctime, s.Mtime = d.Int64(), d.Int64(), d.Int64(), d.Int64()
	s.Version, s.Cversion, s.Aversion = d.Int32(), d.Int32(), d.Int32()
	s.EphemeralOwner = d.Int64()
	s.DataLength, s.NumChildren = d.Int32(), d.Int32()
	s.Pzxid = d.Int64()
}

// ID is an identity: a scheme and an id within it.
type ID struct {
	Scheme string
	ID     string
}

// ACL grants permissions to an identity.
type ACL struct {
	Perms int32
	ID    ID
}

// EncodeACLs writes a vector of ACLs.
func EncodeACLs(e *Encoder, acls []ACL) {
	e.Int32(int32(len(acls)))
	for _, a := range acls {
		e.Int32(a.Perms)
		e.String(a.ID.Scheme)
		e.String(a.ID.ID)
	}
}

// DecodeACLs reads a vector of ACLs; null reads as nil.
func DecodeACLs(d *Decoder) []ACL {
	n := d.VectorLen(12)
	if n == 0 {
		return nil
	}
	acls := make([]ACL, 0, n)
	for range n {
		acls = append(acls, ACL{Perms: d.Int32(), ID: ID{Scheme: d.String(), ID: d.String()}})
	}
	if d.err != nil {
		return nil
	}
	return acls
}

// WatcherEvent is the body of a watch notification.
type WatcherEvent struct {
	Type  int32
	State int32
	Path  string
}

// Encode writes the event.
func (w *WatcherEvent) Encode(e *Encoder) { e.Int32(w.Type); e.Int32(w.State); e.String(w.Path) }

// Decode reads the event.
func (w *WatcherEvent) Decode(d *Decoder) { w.Type, w.State, w.Path = d.Int32(), d.Int32(), d.String() }

// MultiHeader precedes each operation and result of a multi.
type MultiHeader struct {
	Type int32
	Done bool
	Err  int32
}

// Encode writes the header.
func (h *MultiHeader) Encode(e *Encoder) { e.Int32(h.Type); e.Bool(h.Done); e.Int32(h.Err) }

// Decode reads the header.
func (h *MultiHeader) Decode(d *Decoder) { h.Type, h.Done, h.Err = d.Int32(), d.Bool(), d.Int32() }
