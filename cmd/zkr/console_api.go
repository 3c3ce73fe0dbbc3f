package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
)

//go:embed console
var consoleAssets embed.FS

// consoleOptions are what a console serves and whom it trusts.
type consoleOptions struct {
	Servers      []string    // the ensemble, for the four-letter words (orphans, health)
	TLS          *tls.Config // for the four-letter words, when the servers speak TLS
	AllowWrites  bool        // create, set, delete and acl (with the token)
	RequireToken bool        // every API request needs the token (a public address)
	Token        string      // the run's secret

	// NewSession makes the console's next session once the current one is
	// over (expired); it must return when its ctx ends. The sessions it
	// makes belong to the console. Nil: the console stays on its expired
	// session, and every read fails.
	NewSession func(ctx context.Context) (*zkrecipes.Session, error)
}

// console is the HTTP handler of zkr console: the embedded page and its
// JSON API, over one Session at a time (a new one after each expiry, see
// keep). Every read is a read of the server (the page is never shown a
// stale copy, except the recipes' discovery, which walks the subtree's
// Cache); each shown subtree is followed by one Cache, shared by the pages
// showing it, and made again on each new session.
type console struct {
	opts consoleOptions
	mux  *http.ServeMux

	smu       sync.Mutex
	s         *zkrecipes.Session // the current session
	owned     bool               // whether the console made s (and closes it)
	cs        connState
	csChanged chan struct{} // closed at the next change of s or cs

	ctx    context.Context // ends with Close: the caches and the streams
	cancel context.CancelFunc

	mu       sync.Mutex
	subtrees map[string]*subtree
	wg       sync.WaitGroup

	liveMu   sync.Mutex
	liveAt   time.Time // when live was read
	live     map[int64]bool
	liveErr  error
	liveOnce sync.Mutex // one cons round at a time
}

// newConsole serves the console over s, which stays the caller's (the
// sessions made after it, with opts.NewSession, are the console's).
func newConsole(s *zkrecipes.Session, opts consoleOptions) *console {
	ctx, cancel := context.WithCancel(context.Background())
	c := &console{
		s: s, opts: opts, mux: http.NewServeMux(), ctx: ctx, cancel: cancel, subtrees: map[string]*subtree{},
		cs: connState{State: connConnected, Session: sessionIDHex(s.ID())}, csChanged: make(chan struct{}),
	}
	c.wg.Add(1)
	go c.keep()
	static, _ := fs.Sub(consoleAssets, "console")
	c.mux.Handle("GET /", http.FileServerFS(static))
	c.mux.HandleFunc("GET /api/info", c.info)
	c.mux.HandleFunc("GET /api/children", c.children)
	c.mux.HandleFunc("GET /api/node", c.node)
	c.mux.HandleFunc("GET /api/recipes", c.recipes)
	c.mux.HandleFunc("GET /api/health", c.health)
	c.mux.HandleFunc("GET /api/events", c.events)
	c.mux.HandleFunc("POST /api/create", c.write(c.create))
	c.mux.HandleFunc("POST /api/set", c.write(c.set))
	c.mux.HandleFunc("POST /api/delete", c.write(c.delete))
	c.mux.HandleFunc("POST /api/acl", c.write(c.setACL))
	return c
}

// Close ends the event streams, closes the caches and the session the
// console made, if any. It does not close the Session given to
// newConsole.
func (c *console) Close() {
	c.cancel()
	c.wg.Wait()
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.owned {
		c.s.Close()
	}
}

// ServeHTTP checks what every request must pass, then serves it.
func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Against DNS rebinding: a page of another site whose name resolves
	// to this address must not read the tree as if it were ours.
	if !c.opts.RequireToken && !loopbackHost(r.Host) {
		httpError(w, http.StatusForbidden, fmt.Errorf("host %q is not a loopback name: refused (DNS rebinding?)", r.Host))
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if strings.HasPrefix(r.URL.Path, "/api/") {
		if !sameOrigin(r) {
			httpError(w, http.StatusForbidden, errors.New("cross-site request refused"))
			return
		}
		if c.opts.RequireToken && !c.tokenOK(r) {
			httpError(w, http.StatusForbidden, errors.New("missing or wrong token (X-Zkr-Token): this console is public"))
			return
		}
	}
	c.mux.ServeHTTP(w, r)
}

// loopbackHost tells whether a Host header names a loopback address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin tells whether r comes from the console's own page (or from
// no page: curl), by the Fetch Metadata and Origin headers browsers set.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	return true
}

func (c *console) tokenOK(r *http.Request) bool {
	t := r.Header.Get("X-Zkr-Token")
	return t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(c.opts.Token)) == 1
}

// write wraps a writing endpoint: refused unless writes are allowed, the
// token is right and the body is JSON (which a cross-site form cannot
// send without a preflight that fails).
func (c *console) write(f func(ctx context.Context, body []byte) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !c.opts.AllowWrites:
			httpError(w, http.StatusForbidden, errors.New("this console is read-only (start it with --allow-writes)"))
			return
		case !c.tokenOK(r):
			httpError(w, http.StatusForbidden, errors.New("missing or wrong token (X-Zkr-Token): writes need the token zkr console printed"))
			return
		case !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"):
			httpError(w, http.StatusUnsupportedMediaType, errors.New("a write's body must be application/json"))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 2<<20))
		if err != nil {
			httpError(w, http.StatusBadRequest, fmt.Errorf("reading the request: %w", err))
			return
		}
		v, err := f(r.Context(), body)
		if err != nil {
			httpError(w, statusOf(err), err)
			return
		}
		writeJSON(w, v)
	}
}

// httpError answers {"error": ...} with code.
func httpError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// badRequest marks an error as the request's fault.
type badRequest struct{ error }

func (e badRequest) Unwrap() error { return e.error }

// statusOf maps an error to an HTTP status.
func statusOf(err error) int {
	var br badRequest
	switch {
	case errors.As(err, &br), errors.Is(err, zkrecipes.ErrInvalidPath), errors.Is(err, zkrecipes.ErrInvalidArgument),
		errors.Is(err, zkclient.ErrInvalidACL):
		return http.StatusBadRequest
	case errors.Is(err, zkclient.ErrNoNode):
		return http.StatusNotFound
	case errors.Is(err, zkclient.ErrNodeExists), errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNotEmpty):
		return http.StatusConflict
	case errors.Is(err, zkclient.ErrNoAuth):
		return http.StatusForbidden
	case errors.Is(err, zkrecipes.ErrSessionExpired), errors.Is(err, zkrecipes.ErrSessionClosed), errors.Is(err, zkrecipes.ErrConnectionLoss):
		return http.StatusServiceUnavailable // until the connection is back, or the next session made
	}
	return http.StatusBadGateway
}

// pathArg returns the request's "path" parameter, "/" by default.
func pathArg(r *http.Request) string {
	if p := r.URL.Query().Get("path"); p != "" {
		return p
	}
	return "/"
}

func (c *console) info(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{
		"servers":       c.opts.Servers,
		"session":       sessionIDHex(c.session().ID()),
		"conn":          func() connState { cs, _ := c.conn(); return cs }(),
		"writes":        c.opts.AllowWrites,
		"token_needed":  c.opts.RequireToken,
		"version":       strings.TrimSpace(strings.SplitN(versionText(), "\n", 2)[0]),
		"server_now_ms": time.Now().UnixMilli(),
	})
}

// childRow is one child in a listing.
type childRow struct {
	Name        string `json:"name"`
	NumChildren int32  `json:"children"`   // -1: gone, or unreadable
	Ephemeral   bool   `json:"ephemeral"`  // its owner session is not 0
	DataLength  int32  `json:"dataLength"` // bytes
}

// maxPage is the most children one request lists.
const maxPage = 500

// children lists a page of path's children, sorted, optionally only those
// whose name contains q: the page asks for what it shows, so that a node
// of 100,000 children costs a listing and a page of stats per scroll.
func (c *console) children(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	path := pathArg(r)
	offset, _ := strconv.Atoi(q.Get("offset"))
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 || limit > maxPage {
		limit = 100
	}
	s := c.session()
	names, st, err := s.Children(r.Context(), path)
	if err != nil {
		httpError(w, statusOf(err), err)
		return
	}
	slices.Sort(names)
	all := len(names)
	if f := q.Get("q"); f != "" {
		names = slices.DeleteFunc(names, func(n string) bool { return !strings.Contains(n, f) })
	}
	total := len(names)
	offset = min(max(offset, 0), total)
	page := names[offset:min(offset+limit, total)]
	rows := make([]childRow, len(page))
	var wg sync.WaitGroup
	for i, n := range page {
		wg.Add(1)
		go func() { // the client pipelines them on its connection
			defer wg.Done()
			rows[i] = childRow{Name: n, NumChildren: -1}
			cst, ok, err := s.Exists(r.Context(), joinPath(path, n))
			if err == nil && ok {
				rows[i] = childRow{Name: n, NumChildren: cst.NumChildren, Ephemeral: cst.EphemeralOwner != 0, DataLength: cst.DataLength}
			}
		}()
	}
	wg.Wait()
	// Where the page's expanded children are now, so that it keeps them
	// open as the listing changes around them.
	positions := map[string]int{}
	for _, n := range q["locate"] {
		if i, ok := slices.BinarySearch(names, n); ok {
			positions[n] = i
		}
	}
	writeJSON(w, map[string]any{
		"path": path, "all": all, "total": total, "offset": offset, "children": rows,
		"positions": positions, "stat": viewStat(st),
	})
}

// joinPath is the path of child name under parent.
func joinPath(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}

// consoleNode is one node as the details pane shows it.
type consoleNode struct {
	Path       string     `json:"path"`
	Data       *string    `json:"data,omitempty"` // UTF-8 text
	DataBase64 string     `json:"data_base64"`
	Stat       *statView  `json:"stat"`
	Version    int32      `json:"version"`
	ACL        []aclEntry `json:"acl"`
	ACLVersion int32      `json:"acl_version"` // the ACL's, read with it: the version to give /api/acl
	ACLError   string     `json:"acl_error,omitempty"`
	Owner      string     `json:"owner,omitempty"` // the ephemeral owner, 0x…
}

func (c *console) node(w http.ResponseWriter, r *http.Request) {
	path := pathArg(r)
	s := c.session()
	data, st, err := s.Get(r.Context(), path)
	if err != nil {
		httpError(w, statusOf(err), err)
		return
	}
	v := consoleNode{Path: path, DataBase64: base64.StdEncoding.EncodeToString(data), Stat: viewStat(st), Version: st.Version}
	if utf8.Valid(data) {
		s := string(data)
		v.Data = &s
	}
	if st.EphemeralOwner != 0 {
		v.Owner = sessionIDHex(st.EphemeralOwner)
	}
	if acl, ast, err := s.GetACL(r.Context(), path); err != nil {
		v.ACLError = err.Error()
	} else {
		v.ACL, v.ACLVersion = viewACL(acl), ast.Aversion
	}
	writeJSON(w, v)
}

// liveSessions returns the sessions connected to any server, read at most
// once a second.
func (c *console) liveSessions(ctx context.Context) (map[int64]bool, error) {
	c.liveOnce.Lock()
	defer c.liveOnce.Unlock()
	c.liveMu.Lock()
	fresh := time.Since(c.liveAt) < time.Second
	live, err := c.live, c.liveErr
	c.liveMu.Unlock()
	if fresh {
		return live, err
	}
	live, err = liveSessions(ctx, c.opts.Servers, c.opts.TLS)
	c.liveMu.Lock()
	c.live, c.liveErr, c.liveAt = live, err, time.Now()
	c.liveMu.Unlock()
	return live, err
}

// maxLines is the most lines the recipes view inspects at once.
const maxLines = 200

// recipeView is one line of contenders, as the recipes view draws it.
type recipeView struct {
	*inspection
	Pzxid   string `json:"pzxid"`   // the line's last change of children: at or above the holder's fencing token
	Summary string `json:"summary"` // what the recipe is and holds, in a line
}

// recipes shows every recipe under path: each line of contenders (a node
// of the subtree's Cache with a sequential child, read with
// zkrecipes.Inspect) and each recipe recognise knows (read from the
// Cache's copy).
func (c *console) recipes(w http.ResponseWriter, r *http.Request) {
	path := pathArg(r)
	st, err := c.acquire(r.Context(), path)
	if err != nil {
		httpError(w, statusOf(err), err)
		return
	}
	defer c.release(st)
	cache := st.current()
	s := c.session()
	now := time.Now()
	out := []recipeView{}
	truncated := false
	var walk func(p string) error
	walk = func(p string) error {
		if len(out) == maxLines {
			truncated = true
			return nil
		}
		kids := cache.Children(p)
		slices.Sort(kids)
		in, err := recognise(r.Context(), cacheReader{cache}, p, kids, now)
		if err != nil {
			return err
		}
		if in == nil && slices.ContainsFunc(kids, sequential) {
			v, err := zkrecipes.Inspect(r.Context(), s, p)
			if err != nil {
				return fmt.Errorf("inspecting %s: %w", p, err)
			}
			if len(v.Entries) > 0 {
				in = newInspection(v, now)
			}
		}
		if in != nil {
			_, pst, _ := cache.Get(p)
			out = append(out, recipeView{inspection: in, Pzxid: "0x" + strconv.FormatInt(pst.Pzxid, 16), Summary: in.summary()})
		}
		for _, k := range kids {
			// Contenders' and a recipe's own nodes are not recipes.
			if sequential(k) || in != nil && recipeParts(in.Recipe, k) {
				continue
			}
			if err := walk(joinPath(p, k)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(path); err != nil {
		httpError(w, statusOf(err), err)
		return
	}
	needLive := len(out) > 0
	why := ""
	sessionsKnown := false
	if needLive {
		live, err := c.liveSessions(r.Context())
		if err != nil {
			why = err.Error()
		} else {
			sessionsKnown = true
			for _, rv := range out {
				rv.SessionsKnown = true
				for i := range rv.Contenders {
					cv := &rv.Contenders[i]
					orphan := cv.owner != 0 && !live[cv.owner]
					cv.Orphaned = &orphan
				}
			}
		}
	}
	writeJSON(w, map[string]any{
		"path": path, "lines": out, "truncated": truncated,
		"sessions_known": sessionsKnown, "sessions_unknown_because": why,
	})
}

// memberHealth is one server as the ensemble view shows it.
type memberHealth struct {
	Addr        string  `json:"addr"`
	Error       string  `json:"error,omitempty"`
	Mode        string  `json:"mode,omitempty"`
	Version     string  `json:"version,omitempty"`
	LatencyAvg  float64 `json:"latency_avg_ms"`
	LatencyMax  float64 `json:"latency_max_ms"`
	Outstanding int     `json:"outstanding"`
	Znodes      int     `json:"znodes"`
	Watches     int     `json:"watches"`
	Connections int     `json:"connections"`
	Zxid        string  `json:"zxid,omitempty"`
}

// sessionRow is one connected session.
type sessionRow struct {
	Session string `json:"session"`
	Server  string `json:"server"`
	Client  string `json:"client"`
	Timeout string `json:"timeout_ms"`
	LastOp  string `json:"last_op"`
	Queued  string `json:"queued"`
}

// health asks every server srvr, mntr and cons.
func (c *console) health(w http.ResponseWriter, r *http.Request) {
	var opts []zkadmin.Option
	if c.opts.TLS != nil {
		opts = append(opts, zkadmin.WithTLS(c.opts.TLS))
	}
	members := make([]memberHealth, len(c.opts.Servers))
	sessions := make([][]sessionRow, len(c.opts.Servers))
	var wg sync.WaitGroup
	for i, addr := range c.opts.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
			defer cancel()
			m := memberHealth{Addr: addr}
			st, err := zkadmin.Srvr(ctx, addr, opts...)
			if err != nil {
				m.Error = err.Error()
				members[i] = m
				return
			}
			m.Mode, m.Version, m.LatencyAvg, m.LatencyMax = st.Mode, st.Version, st.LatencyAvg, st.LatencyMax
			m.Outstanding, m.Znodes, m.Connections = st.Outstanding, st.NodeCount, st.Connections
			m.Zxid = "0x" + strconv.FormatInt(st.Zxid, 16)
			if mn, err := zkadmin.Mntr(ctx, addr, opts...); err == nil {
				m.Watches, _ = strconv.Atoi(mn["zk_watch_count"])
			} else {
				m.Watches = -1
			}
			members[i] = m
			if conns, err := zkadmin.Cons(ctx, addr, opts...); err == nil {
				for _, cn := range conns {
					if cn.SessionID == 0 {
						continue
					}
					sessions[i] = append(sessions[i], sessionRow{
						Session: sessionIDHex(cn.SessionID), Server: addr, Client: cn.Addr,
						Timeout: cn.Fields["to"], LastOp: cn.Fields["lop"], Queued: cn.Fields["queued"],
					})
				}
			}
		}()
	}
	wg.Wait()
	writeJSON(w, map[string]any{"members": members, "sessions": slices.Concat(sessions...), "at_ms": time.Now().UnixMilli()})
}

// writeRequest is the body of create, set, delete and acl.
type writeRequest struct {
	Path       string   `json:"path"`
	Data       *string  `json:"data"`        // text
	DataBase64 *string  `json:"data_base64"` // or bytes
	Mode       string   `json:"mode"`        // create: persistent (default), sequential, container
	Version    *int32   `json:"version"`     // set, delete: the version to expect; acl: the ACL version (default any)
	ACL        []string `json:"acl"`         // acl: the new ACL, scheme:id:perms entries as zkr acl set takes them
	Recursive  bool     `json:"recursive"`   // delete: with its children
	Confirm    string   `json:"confirm"`     // delete with recursive: the path again
	Parents    bool     `json:"parents"`     // create: the missing parents too
}

func decodeWrite(body []byte) (*writeRequest, []byte, error) {
	var req writeRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, nil, badRequest{fmt.Errorf("the request's JSON: %w", err)}
	}
	if req.Path == "" {
		return nil, nil, badRequest{errors.New("no path")}
	}
	var data []byte
	switch {
	case req.Data != nil && req.DataBase64 != nil:
		return nil, nil, badRequest{errors.New("give data or data_base64, not both")}
	case req.Data != nil:
		data = []byte(*req.Data)
	case req.DataBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*req.DataBase64)
		if err != nil {
			return nil, nil, badRequest{fmt.Errorf("data_base64: %w", err)}
		}
		data = b
	}
	return &req, data, nil
}

func (c *console) create(ctx context.Context, body []byte) (any, error) {
	req, data, err := decodeWrite(body)
	if err != nil {
		return nil, err
	}
	var mode zkclient.CreateMode
	switch req.Mode {
	case "", "persistent":
		mode = zkclient.Persistent
	case "sequential":
		mode = zkclient.PersistentSequential
	case "container":
		mode = zkclient.Container
	default:
		return nil, badRequest{fmt.Errorf("mode %q: expected persistent, sequential or container (the console's session is not the place for ephemeral nodes)", req.Mode)}
	}
	if req.Parents {
		if err := c.session().CreateParents(ctx, req.Path, zkclient.Persistent, nil); err != nil {
			return nil, err
		}
	}
	cr, err := c.session().Create(ctx, req.Path, data, mode, nil)
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": cr.Path}, nil
}

func (c *console) set(ctx context.Context, body []byte) (any, error) {
	req, data, err := decodeWrite(body)
	if err != nil {
		return nil, err
	}
	version := int32(-1)
	if req.Version != nil {
		version = *req.Version
	}
	st, err := c.session().Set(ctx, req.Path, data, version)
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": req.Path, "stat": viewStat(st)}, nil
}

func (c *console) delete(ctx context.Context, body []byte) (any, error) {
	req, _, err := decodeWrite(body)
	if err != nil {
		return nil, err
	}
	if req.Path == "/" {
		return nil, badRequest{errors.New("the root cannot be deleted")}
	}
	if req.Recursive {
		if req.Confirm != req.Path {
			return nil, badRequest{fmt.Errorf("deleting %s with its children needs its path typed again (confirm)", req.Path)}
		}
		if err := c.session().DeleteTree(ctx, req.Path); err != nil {
			return nil, err
		}
		return map[string]any{"path": req.Path}, nil
	}
	version := int32(-1)
	if req.Version != nil {
		version = *req.Version
	}
	if err := c.session().Delete(ctx, req.Path, version); err != nil {
		return nil, err
	}
	return map[string]any{"path": req.Path}, nil
}

// setACL replaces a node's ACL, if its ACL version is still the one given
// (the node view's acl_version), with entries parsed as zkr acl set parses
// its arguments. A bad entry changes nothing and is named in the error.
func (c *console) setACL(ctx context.Context, body []byte) (any, error) {
	req, _, err := decodeWrite(body)
	if err != nil {
		return nil, err
	}
	entries, err := parseACL(req.ACL)
	if err != nil {
		return nil, badRequest{err}
	}
	acl, err := clientACL(req.Path, entries)
	if err != nil {
		return nil, badRequest{err}
	}
	version := int32(-1)
	if req.Version != nil {
		version = *req.Version
	}
	st, err := c.session().SetACL(ctx, req.Path, acl, version)
	switch {
	case errors.Is(err, zkclient.ErrBadVersion):
		return nil, fmt.Errorf("the ACL of %s changed since it was read (it is no longer at ACL version %d): %w", req.Path, version, err)
	case errors.Is(err, zkclient.ErrNoAuth):
		return nil, fmt.Errorf("the console's session may not change the ACL of %s (that needs the admin permission, a): %w", req.Path, err)
	case errors.Is(err, zkclient.ErrInvalidACL):
		return nil, fmt.Errorf("ZooKeeper refused the ACL (an auth: entry needs the console's session authenticated; an id must suit its scheme): %w", err)
	case err != nil:
		return nil, err
	}
	return map[string]any{"path": req.Path, "acl": entries, "stat": viewStat(st)}, nil
}
