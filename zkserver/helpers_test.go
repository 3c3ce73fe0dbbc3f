package zkserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/interop"
	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// rawClient is a minimal ZooKeeper client on the jute codec, for exact
// frame-by-frame checks and requests no client library sends.
type rawClient struct {
	t       testing.TB
	nc      net.Conn
	xid     int32
	id      int64
	passwd  []byte
	timeout int32
	frames  []frame                  // every frame received, in order
	redial  func() (net.Conn, error) // a new connection to the server, to end the session on
}

// frame is one frame a raw client received: a reply or a notification.
type frame struct {
	hdr   jute.ReplyHeader
	body  []byte
	event *jute.WatcherEvent
}

// dialRaw opens a session: a new one (id 0), or id's again with passwd
// (nil for a zero password).
func dialRaw(t testing.TB, addr string, id int64, passwd []byte, readOnly bool) (*rawClient, jute.ConnectResponse, error) {
	t.Helper()
	if passwd == nil {
		passwd = make([]byte, 16)
	}
	return dialConnect(t, addr, jute.ConnectRequest{TimeOut: 4000, SessionID: id, Passwd: passwd, HasReadOnly: readOnly})
}

// dialConnect dials addr, closed when the test ends, and sends req.
func dialConnect(t testing.TB, addr string, req jute.ConnectRequest) (*rawClient, jute.ConnectResponse, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, jute.ConnectResponse{}, err
	}
	t.Cleanup(func() { nc.Close() })
	return handshake(t, nc, req)
}

// handshake sends req as the connect request on nc and returns the
// client and the server's answer, or the error that ended the handshake.
func handshake(t testing.TB, nc net.Conn, req jute.ConnectRequest) (*rawClient, jute.ConnectResponse, error) {
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	e := jute.NewFrameEncoder()
	req.Encode(e)
	if _, err := nc.Write(e.Frame()); err != nil {
		return nil, jute.ConnectResponse{}, err
	}
	p, err := jute.ReadFrame(nc, 1<<20)
	if err != nil {
		return nil, jute.ConnectResponse{}, err
	}
	var resp jute.ConnectResponse
	resp.Decode(jute.NewDecoder(p))
	c := &rawClient{t: t, nc: nc, id: resp.SessionID, passwd: resp.Passwd, timeout: resp.TimeOut,
		redial: func() (net.Conn, error) { return net.DialTimeout("tcp", nc.RemoteAddr().String(), 5*time.Second) }}
	if resp.SessionID != 0 {
		t.Cleanup(c.closeSession)
	}
	return c, resp, nil
}

// closeSession ends c's session when its test ends. A session left to
// expire would end a few seconds later, in whatever case is running
// then: its expiry is a transaction, which shifts the zxids of that
// case's transcript on one server only. If c's connection no longer
// answers (the server closed it, or it holds an unanswered request), the
// session is taken over on a new connection and closed there; a server
// that refuses the session has ended it already.
func (c *rawClient) closeSession() {
	if closeOn(c.nc, c.xid+1) == nil {
		return
	}
	nc, err := c.redial()
	if err != nil {
		return
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(zktest.Bound(5 * time.Second)))
	e := jute.NewFrameEncoder()
	(&jute.ConnectRequest{TimeOut: c.timeout, SessionID: c.id, Passwd: c.passwd}).Encode(e)
	if _, err := nc.Write(e.Frame()); err != nil {
		return
	}
	p, err := jute.ReadFrame(nc, 1<<20)
	if err != nil {
		return
	}
	var resp jute.ConnectResponse
	resp.Decode(jute.NewDecoder(p))
	if resp.SessionID == c.id {
		closeOn(nc, 1)
	}
}

// closeOn sends closeSession with xid on nc and reads up to its reply.
func closeOn(nc net.Conn, xid int32) error {
	nc.SetDeadline(time.Now().Add(zktest.Bound(2 * time.Second)))
	e := jute.NewFrameEncoder()
	(&jute.Request{Xid: xid, Op: jute.OpCloseSession}).Encode(e)
	if _, err := nc.Write(e.Frame()); err != nil {
		return err
	}
	for {
		p, err := jute.ReadFrame(nc, 1<<20)
		if err != nil {
			return err
		}
		var hdr jute.ReplyHeader
		hdr.Decode(jute.NewDecoder(p))
		if hdr.Xid == xid {
			return nil
		}
	}
}

func newRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	c, resp, err := dialRaw(t, addr, 0, nil, false)
	if err != nil {
		t.Fatalf("raw connect: %v", err)
	}
	if resp.SessionID == 0 {
		t.Fatalf("raw connect: refused")
	}
	return c
}

// send writes a request with the next xid (or r.Xid if set) and returns
// the xid.
func (c *rawClient) send(r jute.Request) int32 {
	if r.Xid == 0 {
		c.xid++
		r.Xid = c.xid
	}
	e := jute.NewFrameEncoder()
	r.Encode(e)
	if _, err := c.nc.Write(e.Frame()); err != nil {
		c.t.Fatalf("raw send: %v", err)
	}
	return r.Xid
}

// readFrame reads the next frame.
func (c *rawClient) readFrame() (frame, error) {
	p, err := jute.ReadFrame(c.nc, 1<<20)
	if err != nil {
		return frame{}, err
	}
	d := jute.NewDecoder(p)
	var f frame
	f.hdr.Decode(d)
	f.body = d.Rest()
	if f.hdr.Xid == jute.XidNotification {
		f.event = &jute.WatcherEvent{}
		f.event.Decode(d)
	}
	c.frames = append(c.frames, f)
	return f, d.Err()
}

// call sends r and reads frames up to its reply, which it returns.
func (c *rawClient) call(r jute.Request) frame {
	c.t.Helper()
	xid := c.send(r)
	for {
		f, err := c.readFrame()
		if err != nil {
			c.t.Fatalf("raw call op %d: %v", r.Op, err)
		}
		if f.hdr.Xid == xid {
			return f
		}
	}
}

// waitEvents reads frames until n notifications arrived since the last
// call to take.
func (c *rawClient) events(n int) []jute.WatcherEvent {
	c.t.Helper()
	var out []jute.WatcherEvent
	for _, f := range c.frames {
		if f.event != nil {
			out = append(out, *f.event)
		}
	}
	for len(out) < n {
		f, err := c.readFrame()
		if err != nil {
			c.t.Fatalf("raw events: have %v, want %d: %v", out, n, err)
		}
		if f.event != nil {
			out = append(out, *f.event)
		}
	}
	return out
}

func (e frame) String() string {
	if e.event != nil {
		return fmt.Sprintf("event(%d %s)", e.event.Type, e.event.Path)
	}
	return fmt.Sprintf("reply(xid=%d err=%d)", e.hdr.Xid, e.hdr.Err)
}

func dialRawTimeout(t testing.TB, addr string, ms int32) (*rawClient, jute.ConnectResponse, error) {
	return dialConnect(t, addr, jute.ConnectRequest{TimeOut: ms, Passwd: make([]byte, 16)})
}

func dialTimeout(t *testing.T, addr string, ms int32) (int32, error) {
	c, resp, err := dialRawTimeout(t, addr, ms)
	if err != nil {
		return 0, err
	}
	c.call(jute.Request{Op: jute.OpCloseSession})
	return resp.TimeOut, nil
}

// dialRawZxid sends a connect request for a new session that says it has
// seen zxid, and returns the connection and the answer, if any.
func dialRawZxid(t *testing.T, addr string, zxid int64) (net.Conn, jute.ConnectResponse, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, resp, err := handshake(t, nc, jute.ConnectRequest{TimeOut: 4000, LastZxidSeen: zxid, Passwd: make([]byte, 16)})
	return nc, resp, err
}

var open = []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}

func create(p string, data string, flags int32) jute.Request {
	return jute.Request{Op: jute.OpCreate, Path: p, Data: []byte(data), ACL: open, Flags: flags}
}

func create2(p string, data string, flags int32) jute.Request {
	r := create(p, data, flags)
	r.Op = jute.OpCreate2
	return r
}

func del(p string, version int32) jute.Request {
	return jute.Request{Op: jute.OpDelete, Path: p, Version: version}
}

func setData(p, data string, version int32) jute.Request {
	return jute.Request{Op: jute.OpSetData, Path: p, Data: []byte(data), Version: version}
}

func getData(p string, watch bool) jute.Request {
	return jute.Request{Op: jute.OpGetData, Path: p, Watch: watch}
}

func exists(p string, watch bool) jute.Request {
	return jute.Request{Op: jute.OpExists, Path: p, Watch: watch}
}

func children(p string, watch bool) jute.Request {
	return jute.Request{Op: jute.OpGetChildren2, Path: p, Watch: watch}
}

func check(p string, version int32) jute.Request {
	return jute.Request{Op: jute.OpCheck, Path: p, Version: version}
}

func multi(ops ...jute.Request) jute.Request {
	return jute.Request{Op: jute.OpMulti, Ops: ops}
}

// nullCreate is a create whose data is a null buffer (length -1), as
// kazoo sends for create(path, None) and the Java client for a null
// byte[].
func nullCreate(op int32, p string, flags int32) jute.Request {
	return jute.Request{Op: op, Path: p, Data: nil, ACL: open, Flags: flags}
}

var openACL = zkclient.WorldACL(zkclient.PermAll)

// zkConnect connects a zkclient session (4s timeout) to addr and records
// its state changes; it is closed when the test ends.
func zkConnect(t *testing.T, addr string) (*zkclient.Client, *stateLog) {
	t.Helper()
	log := &stateLog{}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := zkclient.Connect(ctx, []string{addr}, zkclient.WithSessionTimeout(4*time.Second),
		zkclient.WithStateCallback(log.add))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, log
}

// stateLog records the session states a client reports.
type stateLog struct {
	mu     sync.Mutex
	states []zkclient.State
}

func (l *stateLog) add(ev zkclient.StateEvent) {
	l.mu.Lock()
	l.states = append(l.states, ev.State)
	l.mu.Unlock()
}

// wait waits until state s has been reported after the last wait.
func (l *stateLog) wait(s zkclient.State, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for i, x := range l.states {
			if x == s {
				l.states = l.states[i+1:]
				l.mu.Unlock()
				return true
			}
		}
		l.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// recvEvent returns w's event, failing the test if none comes.
func recvEvent(t *testing.T, w *zkclient.Watch) zkclient.Event {
	t.Helper()
	select {
	case ev := <-w.Event():
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
		return zkclient.Event{}
	}
}

// startDurable starts a server on dir and addr, retrying while the old
// port lingers.
func startDurable(t *testing.T, opts zkserver.Options, addr string) *zkserver.Server {
	t.Helper()
	var err error
	for range 50 {
		s := zkserver.NewServer(opts)
		if err = s.Start(addr); err == nil {
			t.Cleanup(s.Close)
			return s
		}
		s.Close()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(err)
	return nil
}

// dump returns every node below /, except /zookeeper, with its data and
// stat.
func dump(t *testing.T, s *zkserver.Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(p string)
	walk = func(p string) {
		data, err := s.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.NodeStat(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = fmt.Sprintf("%q %+v", data, st)
		kids, err := s.Children(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kids {
			if p == "/" && k == "zookeeper" {
				continue
			}
			walk(strings.TrimSuffix(p, "/") + "/" + k)
		}
	}
	walk("/")
	return out
}

// reopen starts a server on opts (a DataDir someone wrote) and requires
// it to hold the tree want (a dump).
func reopen(t *testing.T, opts zkserver.Options, want map[string]string) *zkserver.Server {
	t.Helper()
	s := startDurable(t, opts, "127.0.0.1:0")
	sameTree(t, want, dump(t, s))
	return s
}

// reload closes s and requires a new server on opts (s's DataDir) to
// hold the tree s had.
func reload(t *testing.T, s *zkserver.Server, opts zkserver.Options) *zkserver.Server {
	t.Helper()
	want := dump(t, s)
	s.Close()
	return reopen(t, opts, want)
}

// sameTree requires the dump got to be the dump want.
func sameTree(t *testing.T, want, got map[string]string) {
	t.Helper()
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: got %s, want %s", p, got[p], w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: unexpected node %s", p, got[p])
		}
	}
}

// writeSome runs a mix of transactions from a client.
func writeSome(t *testing.T, c *zkclient.Client, prefix string) {
	t.Helper()
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Create(ctx, prefix, []byte("root"), zkclient.Persistent, openACL)
	must(err)
	_, err = c.Create(ctx, prefix+"/a", []byte("1"), zkclient.Persistent, openACL)
	must(err)
	for i := range 3 {
		_, err = c.Set(ctx, prefix+"/a", fmt.Appendf(nil, "v%d", i), -1)
		must(err)
	}
	for range 3 {
		_, err = c.Create(ctx, prefix+"/seq-", nil, zkclient.PersistentSequential, openACL)
		must(err)
	}
	must(c.Delete(ctx, prefix+"/seq-0000000001", -1))
	_, err = c.SetACL(ctx, prefix+"/a", zkclient.WorldACL(zkclient.PermRead|zkclient.PermWrite), -1)
	must(err)
	_, err = c.Multi(ctx, c.CreateOp(prefix+"/m", []byte("m"), zkclient.Persistent, openACL),
		c.CreateOp(prefix+"/m/x", nil, zkclient.Persistent, openACL),
		c.SetOp(prefix, []byte("r2"), -1))
	must(err)
	_, err = c.Multi(ctx, c.DeleteOp(prefix+"/m/x", -1),
		c.DeleteOp(prefix+"/m", -1),
		c.CreateOp(prefix+"/m", []byte("again"), zkclient.Persistent, openACL),
		c.CreateOp(prefix+"/m/y", nil, zkclient.Persistent, openACL),
		c.CreateOp(prefix+"/gone", nil, zkclient.Persistent, openACL),
		c.DeleteOp(prefix+"/gone", -1))
	must(err)
	_, err = c.Multi(ctx, c.CreateOp(prefix+"/never", nil, zkclient.Persistent, openACL),
		c.DeleteOp(prefix+"/nope", -1))
	if !errors.Is(err, zkclient.ErrNoNode) {
		t.Fatalf("failed multi: %v", err)
	}
	_, err = c.Create(ctx, prefix+"/a", nil, zkclient.Persistent, openACL) // a failed write takes a zxid too
	if !errors.Is(err, zkclient.ErrNodeExists) {
		t.Fatalf("create twice: %v", err)
	}
}

// faultyFsync is a fsync that fails, while armed, for the files whose
// name contains match.
type faultyFsync struct {
	match string
	armed atomic.Bool
	delay time.Duration // while armed, sleep this long instead of failing
	calls atomic.Int64  // armed calls
}

func (f *faultyFsync) sync(file *os.File) error {
	if f.armed.Load() && strings.Contains(filepath.Base(file.Name()), f.match) {
		f.calls.Add(1)
		if f.delay > 0 {
			time.Sleep(f.delay)
			return file.Sync()
		}
		return fmt.Errorf("injected fsync failure of %s: %w", file.Name(), syscall.EIO)
	}
	return file.Sync()
}

// flw sends a four-letter word (with extra bytes after it, for stmk) on a
// new connection and returns the whole answer and the connection's local
// address, which the answers of cons and stat list.
func flw(t *testing.T, addr, cmd string, extra ...byte) (string, string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(append([]byte(cmd), extra...)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(nc)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return string(b), nc.LocalAddr().String()
}

var wchsRE = regexp.MustCompile(`^(\d+) connections watching (\d+) paths\nTotal watches:(\d+)\n$`)

// wchs returns the three numbers of wchs.
func wchs(t *testing.T, addr string) [3]int {
	t.Helper()
	out, _ := flw(t, addr, "wchs")
	m := wchsRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("wchs: %q", out)
	}
	var n [3]int
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	return n
}

// testCA is a throwaway certificate authority for TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, cert := issue(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "zkserver test CA"},
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue creates a key and a certificate from template, signed by parent
// (self-signed if nil).
func issue(t testing.TB, template, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template.SerialNumber, _ = rand.Int(rand.Reader, big.NewInt(1<<62))
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

// serverCert returns a certificate for 127.0.0.1.
func (ca *testCA) serverCert(t testing.TB) tls.Certificate {
	key, cert := issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "zkserver test server"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca.cert, ca.key)
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
}

// clientCert returns a client certificate with the given subject.
func (ca *testCA) clientCert(t testing.TB, subject pkix.Name) tls.Certificate {
	key, cert := issue(t, &x509.Certificate{
		Subject:     subject,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca.cert, ca.key)
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
}

// tlsServer starts zkserver with a secure port that requires client
// certificates signed by ca.
func tlsServer(t testing.TB, ca *testCA, plain string) *zkserver.Server {
	t.Helper()
	s := zkserver.NewServer(zkserver.Options{TLS: &tls.Config{
		Certificates: []tls.Certificate{ca.serverCert(t)},
		ClientCAs:    ca.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}})
	if err := s.Start(plain); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// dialRawTLS opens a session over TLS.
func dialRawTLS(t testing.TB, addr string, cfg *tls.Config) (*rawClient, error) {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { nc.Close() })
	c, _, err := handshake(t, nc, jute.ConnectRequest{TimeOut: 4000, Passwd: make([]byte, 16)})
	if c != nil {
		c.redial = func() (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		}
	}
	return c, err
}

func whoAmI(t testing.TB, c *rawClient) []string {
	t.Helper()
	f := c.call(jute.Request{Op: jute.OpWhoAmI})
	d := jute.NewDecoder(f.body)
	var ids []string
	for range d.VectorLen(8) {
		ids = append(ids, d.String()+":"+d.String())
	}
	return ids
}

func readAll(nc net.Conn) (string, error) {
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String(), err
		}
	}
}

// kazooPrelude starts the kazoo client zk on the server argv[1]; a kazoo
// script (see runKazoo) goes on from there.
const kazooPrelude = `
import sys, threading
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=5)
zk.start(timeout=10)
`

// runKazoo runs script after kazooPrelude in Python, with args after the
// server address, and returns its output; the script must print DONE.
func runKazoo(t *testing.T, script string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := append([]string{"-I", "-c", kazooPrelude + script}, args...)
	out, err := exec.CommandContext(ctx, interop.Python, argv...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "DONE") {
		t.Fatalf("kazoo: %v\n%s", err, out)
	}
	return string(out)
}
