package zkserver

import "github.com/zkrecipes/zkrecipes/internal/jute"

// opResult is the outcome of one operation of a multi.
type opResult struct {
	typ  int32
	code int32
	body []byte
}

// multi applies the operations of a multi in x, all or nothing, and
// returns the reply body: one result per operation, then the end marker.
// When an operation fails, x is rolled back and every result is an error
// result: 0 before the failure, its code, then RuntimeInconsistency.
func (s *Server) multi(x *txn, c *conn, r *jute.Request) []byte {
	results := make([]opResult, 0, len(r.Ops))
	failed := -1
	for i := range r.Ops {
		op := &r.Ops[i]
		code, body := s.write(x, c, op, true)
		if code != 0 {
			failed = i
			results = append(results, opResult{typ: jute.OpError, code: code})
			break
		}
		typ := op.Op
		switch typ {
		case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
			typ = multiCreateType(op.Flags)
		}
		results = append(results, opResult{typ: typ, body: body})
	}
	if failed >= 0 {
		x.rollback()
		for i := range results[:failed] {
			results[i] = opResult{typ: jute.OpError}
		}
		for len(results) < len(r.Ops) {
			results = append(results, opResult{typ: jute.OpError, code: jute.ErrRuntimeInconsistency})
		}
	}
	return encodeResults(results)
}

// multiRead answers the read operations of a multiRead; each succeeds or
// fails on its own.
func (s *Server) multiRead(c *conn, r *jute.Request) []byte {
	results := make([]opResult, 0, len(r.Ops))
	for i := range r.Ops {
		code, body := s.readNode(c, &r.Ops[i])
		if code != 0 {
			results = append(results, opResult{typ: jute.OpError, code: code})
			continue
		}
		results = append(results, opResult{typ: r.Ops[i].Op, body: body})
	}
	return encodeResults(results)
}

func encodeResults(results []opResult) []byte {
	e := &jute.Encoder{}
	for _, res := range results {
		h := jute.MultiHeader{Type: res.typ, Err: res.code}
		h.Encode(e)
		if res.typ == jute.OpError {
			e.Int32(res.code)
		} else {
			e.Raw(res.body)
		}
	}
	end := jute.MultiHeader{Type: -1, Done: true, Err: -1}
	end.Encode(e)
	return e.Bytes()
}
