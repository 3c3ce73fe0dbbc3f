package zkserver_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

func TestConformanceFrames(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		for _, tc := range []struct {
			name  string
			frame []byte
		}{
			{"negative length", []byte{0xff, 0xff, 0xff, 0xfe}},
			{"too long", []byte{0x00, 0x10, 0x00, 0x00}},
			{"truncated create", append([]byte{0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 1}, 0, 0, 0, 9)},
		} {
			a := newRaw(t, tg.addr)
			a.nc.Write(tc.frame)
			f, err := a.readFrame()
			r.logf("%s: closed=%v reply=%v zxid=%s", tc.name, err != nil, f, r.Z(f.hdr.Zxid))
		}
		a := newRaw(t, tg.addr)
		r.do(a, "A", exists("/zookeeper", false))
		r.do(a, "A", jute.Request{Op: jute.OpMulti, Ops: []jute.Request{{Op: jute.OpCheck, Path: "/zookeeper", Version: -1}}})
	})
}

// TestConformanceLargeRequests: a listing of thousands of children, a
// multi of hundreds of operations (failing at the last one, too), a
// multiRead of many reads, data near jute.maxbuffer, and frames at and
// beyond it.
func TestConformanceLargeRequests(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		p := tg.path
		r.do(a, "A", create(p, "", 0))
		name := strings.Repeat("c", 60)
		const kids = 3000
		for i := range kids {
			a.send(create(fmt.Sprintf("%s/%s-%05d", p, name, i), "", 0))
		}
		a.nc.SetDeadline(time.Now().Add(30 * time.Second))
		errs := 0
		for range kids {
			f, err := a.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			if f.hdr.Err != 0 {
				errs++
			}
		}
		r.logf("%d pipelined creates: %d errors", kids, errs)
		f := a.call(children(p, false))
		d := jute.NewDecoder(f.body)
		list := d.Strings()
		var st jute.Stat
		st.Decode(d)
		r.logf("listing: err=%d children=%d bytes=%d %s", f.hdr.Err, len(list), len(f.body), r.fmtStat(st))
		r.do(a, "A", jute.Request{Op: jute.OpGetAllChildrenNumber, Path: p})

		var ops []jute.Request
		for i := range 500 {
			ops = append(ops, create(fmt.Sprintf("%s/m%03d", p, i), "x", 0))
		}
		f = a.call(multi(ops...))
		r.logf("multi of 500 creates: err=%d bytes=%d", f.hdr.Err, len(f.body))
		ops = append(ops[:0], setData(p, "y", -1))
		for i := range 499 {
			ops = append(ops, setData(fmt.Sprintf("%s/m%03d", p, i), "z", -1))
		}
		ops = append(ops, setData(p+"/missing", "z", -1))
		f = a.call(multi(ops...))
		res := r.results(jute.NewDecoder(f.body))
		r.logf("multi of 501 failing last: err=%d bytes=%d first=%s last=%s", f.hdr.Err, len(f.body),
			res[:strings.Index(res, "]")+1], res[strings.LastIndex(res, "["):])
		var reads []jute.Request
		for i := range 200 {
			reads = append(reads, jute.Request{Op: jute.OpGetData, Path: fmt.Sprintf("%s/m%03d", p, i)})
		}
		f = a.call(jute.Request{Op: jute.OpMultiRead, Ops: reads})
		r.logf("multiRead of 200: err=%d bytes=%d", f.hdr.Err, len(f.body))

		// Data: 1,000,000 bytes fit in a request; a frame longer than
		// jute.maxbuffer (1,048,575 bytes) closes the connection.
		big := strings.Repeat("d", 1000000)
		r.do(a, "A big create", jute.Request{Op: jute.OpCreate, Path: p + "/big", Data: []byte(big), ACL: open})
		f = a.call(getData(p+"/big", false))
		got := jute.NewDecoder(f.body).Buffer()
		r.logf("big getData: err=%d intact=%v", f.hdr.Err, bytes.Equal(got, []byte(big)))
		for _, size := range []int{1048575, 1048575 + 1} {
			c := newRaw(t, tg.addr)
			req := setData(p+"/big", "", -1)
			// xid, type, the path's length and bytes, the data's length
			// and bytes, the version
			req.Data = bytes.Repeat([]byte("e"), size-(4+4+4+len(req.Path)+4+4))
			req.Xid = 1000
			e := jute.NewFrameEncoder()
			req.Encode(e)
			// A server that refuses the frame may close the connection
			// while it is still being written: not an error here.
			c.nc.Write(e.Frame())
			c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			f, err := c.readFrame()
			r.logf("setData in a frame of %d bytes: answered=%v err=%d xid match=%v", size, err == nil, f.hdr.Err, f.hdr.Xid == req.Xid)
		}
	})
}
