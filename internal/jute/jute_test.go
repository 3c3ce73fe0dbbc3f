package jute

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestPrimitivesRoundTrip(t *testing.T) {
	e := &Encoder{}
	e.Int32(-7)
	e.Int64(1 << 40)
	e.Bool(true)
	e.Buffer(nil)
	e.Buffer([]byte("ab"))
	e.String("héllo")
	e.Strings(nil)
	e.Strings([]string{"x", ""})
	d := NewDecoder(e.Bytes())
	if v := d.Int32(); v != -7 {
		t.Fatal(v)
	}
	if v := d.Int64(); v != 1<<40 {
		t.Fatal(v)
	}
	if !d.Bool() {
		t.Fatal("bool")
	}
	if v := d.Buffer(); v != nil {
		t.Fatalf("null buffer: %v", v)
	}
	if v := d.Buffer(); string(v) != "ab" {
		t.Fatal(v)
	}
	if v := d.String(); v != "héllo" {
		t.Fatal(v)
	}
	if v := d.Strings(); v != nil {
		t.Fatal(v)
	}
	if v := d.Strings(); !reflect.DeepEqual(v, []string{"x", ""}) {
		t.Fatal(v)
	}
	if d.Err() != nil || d.Len() != 0 {
		t.Fatalf("err %v, %d left", d.Err(), d.Len())
	}
}

func TestWireLayout(t *testing.T) {
	e := NewFrameEncoder()
	h := ReplyHeader{Xid: -1, Zxid: -1, Err: 0}
	h.Encode(e)
	got := e.Frame()
	want := []byte{0, 0, 0, 16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("%x", got)
	}
	var st Stat
	e = &Encoder{}
	st.Encode(e)
	if len(e.Bytes()) != StatSize {
		t.Fatalf("stat is %d bytes", len(e.Bytes()))
	}
}

func TestConnectReadOnlyByte(t *testing.T) {
	for _, ro := range []bool{false, true} {
		in := ConnectRequest{TimeOut: 30000, SessionID: 5, Passwd: make([]byte, 16), HasReadOnly: ro, ReadOnly: ro}
		e := &Encoder{}
		in.Encode(e)
		var out ConnectRequest
		d := NewDecoder(e.Bytes())
		out.Decode(d)
		if d.Err() != nil || !reflect.DeepEqual(in, out) {
			t.Fatalf("%+v → %+v (%v)", in, out, d.Err())
		}
	}
}

func TestRequestRoundTrip(t *testing.T) {
	acl := []ACL{{Perms: PermAll, ID: ID{Scheme: "world", ID: "anyone"}}}
	reqs := []Request{
		{Xid: 1, Op: OpCreate, Path: "/a", Data: []byte("d"), ACL: acl, Flags: 3},
		{Xid: 2, Op: OpCreateTTL, Path: "/t", Data: []byte{}, ACL: acl, Flags: 5, TTL: 99},
		{Xid: 3, Op: OpDelete, Path: "/a", Version: -1},
		{Xid: 4, Op: OpGetData, Path: "/a", Watch: true},
		{Xid: 5, Op: OpSetData, Path: "/a", Data: []byte("x"), Version: 2},
		{Xid: 6, Op: OpSetACL, Path: "/a", ACL: acl, Version: 1},
		{Xid: 7, Op: OpAddWatch, Path: "/a", Mode: 1},
		{Xid: -4, Op: OpAuth, Scheme: "digest", Auth: []byte("u:p")},
		{Xid: -8, Op: OpSetWatches2, RelativeZxid: 9, DataWatches: []string{"/a"}, ExistWatches: nil,
			ChildWatches: nil, PersistWatches: []string{"/p"}},
		{Xid: 8, Op: OpMulti, Ops: []Request{
			{Op: OpCreate, Path: "/m", Data: []byte{}, ACL: acl},
			{Op: OpCheck, Path: "/m", Version: 0},
		}},
		{Xid: 9, Op: OpMultiRead, Ops: []Request{{Op: OpGetChildren, Path: "/"}}},
		{Xid: 10, Op: OpReconfig, Members: "x", ConfigID: -1},
		{Xid: 11, Op: OpWhoAmI},
	}
	for _, in := range reqs {
		e := &Encoder{}
		in.Encode(e)
		out, err := DecodeRequest(e.Bytes())
		if err != nil || !reflect.DeepEqual(in, out) {
			t.Errorf("op %d: %+v\n→ %+v (%v)", in.Op, in, out, err)
		}
	}
}

func TestMalformed(t *testing.T) {
	cases := map[string][]byte{
		"short header":     {0, 0, 0, 1},
		"short path":       {0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 9, '/'},
		"negative length":  {0, 0, 0, 1, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xf0},
		"huge vector":      {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, '/', 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0},
		"unknown in multi": {0, 0, 0, 1, 0, 0, 0, 14, 0, 0, 0, 99, 0, 0, 0, 0, 0},
		"read in multi":    {0, 0, 0, 1, 0, 0, 0, 14, 0, 0, 0, 4, 0, 0, 0, 0, 0},
		"unterminated":     {0, 0, 0, 1, 0, 0, 0, 14},
	}
	for name, p := range cases {
		_, err := DecodeRequest(p)
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		if name != "short header" && !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v is not ErrBadRecord", name, err)
		}
	}
	if r, err := DecodeRequest([]byte{0, 0, 0, 1, 0, 0, 0, 99}); err != nil || r.Op != 99 {
		t.Errorf("unknown op: %+v %v", r, err)
	}
}

func TestReadFrameLimits(t *testing.T) {
	for _, hdr := range [][]byte{{0xff, 0xff, 0xff, 0xff}, {0, 0x10, 0, 0}} {
		_, err := ReadFrame(bytes.NewReader(hdr), MaxFrame)
		if !errors.Is(err, ErrFrameSize) {
			t.Errorf("%x: %v", hdr, err)
		}
	}
	p, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 2, 'h', 'i'}), MaxFrame)
	if err != nil || string(p) != "hi" {
		t.Errorf("%q %v", p, err)
	}
}

// FuzzDecode feeds arbitrary bytes to the frame reader and the request
// and handshake decoders: they may fail, but never panic, and whatever
// decodes must encode back to a request that decodes the same.
func FuzzDecode(f *testing.F) {
	e := &Encoder{}
	(&Request{Xid: 1, Op: OpMulti, Ops: []Request{{Op: OpDelete, Path: "/a", Version: -1}}}).Encode(e)
	f.Add(e.Bytes())
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, '/', 'a', 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 117, 48})
	f.Fuzz(func(t *testing.T, p []byte) {
		ReadFrame(bytes.NewReader(p), MaxFrame)
		var cr ConnectRequest
		cr.Decode(NewDecoder(p))
		r, err := DecodeRequest(p)
		if err != nil || !Known(r.Op) {
			return
		}
		e := &Encoder{}
		r.Encode(e)
		r2, err := DecodeRequest(e.Bytes())
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		e2 := &Encoder{}
		r2.Encode(e2)
		if !bytes.Equal(e.Bytes(), e2.Bytes()) {
			t.Fatalf("not stable: %x vs %x", e.Bytes(), e2.Bytes())
		}
	})
}
