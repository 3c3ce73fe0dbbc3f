package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"
	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func (a *app) newInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect PATH",
		Short: "Show the queue under a lock or election path",
		Long: `Show the contenders queued under PATH, a lock (zkr lock, Curator's
InterProcessMutex, kazoo's Lock), a read/write lock (zkr lock --shared, Curator's
InterProcessReadWriteLock, kazoo's ReadLock/WriteLock) or an election (zkr elect,
Curator's LeaderLatch), in their order: who holds or leads, who waits and for
whom, each one's id (the node's data), its session, and how long ago it queued.

A node whose owner session is connected to none of the servers is flagged
"orphaned?": its owner is gone or cut off, and the node stays, blocking everyone
behind it, until the server expires that session. Telling this needs the "cons"
four-letter word (4lw.commands.whitelist) on every server given in --servers.
Children that are not contenders are listed after the queue.`,
		Example: `  zkr inspect /locks/backup
  zkr inspect /services/mailer --json`,
		Args: onePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.inspect(cmd, args[0], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// contenderView is one node of a queue as inspect shows it.
type contenderView struct {
	Pos      int           `json:"position"` // from 1
	Node     string        `json:"node"`
	Seq      int64         `json:"seq"`
	Kind     string        `json:"kind"`  // mutex, reader, writer, candidate
	State    string        `json:"state"` // holds, leads, waits
	WaitsFor int           `json:"waits_for,omitempty"`
	ID       string        `json:"id,omitempty"`
	Session  string        `json:"session"` // "0x…", or "persistent"
	Created  time.Time     `json:"created"`
	Queued   time.Duration `json:"queued_ns"`
	Orphaned *bool         `json:"orphaned,omitempty"` // unset: could not tell

	owner  int64
	reader bool
}

// inspection is the queue under one path.
type inspection struct {
	Path       string          `json:"path"`
	Exists     bool            `json:"exists"`
	Recipe     string          `json:"recipe"`
	Contenders []contenderView `json:"contenders"`
	Others     []string        `json:"other_children"`
	// SessionsKnown tells whether orphans could be looked for; Why says
	// why not.
	SessionsKnown bool   `json:"sessions_known"`
	Why           string `json:"sessions_unknown_because,omitempty"`
}

func (a *app) inspect(cmd *cobra.Command, path string, asJSON bool) error {
	ctx := cmd.Context()
	c, err := a.dialRaw(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	in, err := readQueue(c, path)
	if err != nil {
		return zkError("inspecting "+path, path, err)
	}
	if len(in.Contenders) > 0 {
		servers, _, _ := a.serverList() // checked by dialRaw
		live, err := liveSessions(ctx, servers)
		if err != nil {
			in.Why = err.Error()
		} else {
			in.SessionsKnown = true
			for i := range in.Contenders {
				cv := &in.Contenders[i]
				orphan := cv.owner != 0 && !live[cv.owner]
				cv.Orphaned = &orphan
			}
		}
	}
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(in)
	}
	in.print(a)
	return nil
}

// markers are the node name markers of the queue recipes, before the
// 10-digit sequence number, with the kind of contender each makes.
var markers = []struct{ marker, kind, recipe string }{
	{"lock-", "mutex", "lock"},
	{"__lock__", "mutex", "lock"},
	{"__READ__", "reader", "read/write lock"},
	{"__WRIT__", "writer", "read/write lock"},
	{"__rlock__", "reader", "read/write lock"},
	{"latch-", "candidate", "election"},
}

// readQueue lists path's children, recognises the contenders and orders them.
func readQueue(c *rawConn, path string) (*inspection, error) {
	in := &inspection{Path: path, Contenders: []contenderView{}, Others: []string{}}
	kids, _, err := c.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return in, nil
	}
	if err != nil {
		return nil, err
	}
	in.Exists = true
	recipes := map[string]bool{}
	now := time.Now()
	for _, k := range kids {
		cv, recipe, ok := parseNode(k)
		if !ok {
			in.Others = append(in.Others, k)
			continue
		}
		data, st, err := c.Get(path + "/" + k)
		if errors.Is(err, zk.ErrNoNode) {
			continue // left meanwhile
		}
		if err != nil {
			return nil, err
		}
		recipes[recipe] = true
		cv.ID = printable(data)
		cv.owner = st.EphemeralOwner
		cv.Session = fmt.Sprintf("0x%x", st.EphemeralOwner)
		if st.EphemeralOwner == 0 {
			cv.Session = "persistent"
		}
		cv.Created = time.UnixMilli(st.Ctime)
		cv.Queued = max(now.Sub(cv.Created), 0).Round(100 * time.Millisecond)
		in.Contenders = append(in.Contenders, cv)
	}
	slices.Sort(in.Others)
	slices.SortFunc(in.Contenders, func(x, y contenderView) int { return int(x.Seq - y.Seq) })
	switch len(recipes) {
	case 0:
		in.Recipe = "none"
	case 1:
		for r := range recipes {
			in.Recipe = r
		}
	default:
		in.Recipe = "mixed"
	}
	rank(in.Contenders, recipes["read/write lock"])
	return in, nil
}

// rank sets the position and state of contenders sorted by sequence: a
// writer (or mutex holder, or candidate) holds when first and otherwise
// waits for the one just before it; a reader holds when no writer is before
// it and otherwise waits for the nearest writer before it. With rw, kazoo's
// "__lock__" nodes are writers.
func rank(cs []contenderView, rw bool) {
	lastWriter := 0 // position of the nearest earlier writer
	for i := range cs {
		cv := &cs[i]
		cv.Pos = i + 1
		if rw && cv.Kind == "mutex" {
			cv.Kind = "writer" // kazoo's WriteLock shares the Lock's marker
		}
		switch {
		case cv.reader && lastWriter > 0:
			cv.State, cv.WaitsFor = "waits", lastWriter
		case cv.reader:
			cv.State = "holds"
		case i > 0:
			cv.State, cv.WaitsFor = "waits", i
		case cv.Kind == "candidate":
			cv.State = "leads"
		default:
			cv.State = "holds"
		}
		if !cv.reader {
			lastWriter = i + 1
		}
	}
}

// parseNode recognises a contender's node name.
func parseNode(name string) (cv contenderView, recipe string, ok bool) {
	if len(name) <= 10 {
		return cv, "", false
	}
	head, tail := name[:len(name)-10], name[len(name)-10:]
	seq, err := strconv.ParseInt(tail, 10, 32)
	if err != nil || seq < 0 {
		return cv, "", false
	}
	for _, m := range markers {
		if strings.HasSuffix(head, m.marker) {
			return contenderView{Node: name, Seq: seq, Kind: m.kind, reader: m.kind == "reader"}, m.recipe, true
		}
	}
	return cv, "", false
}

// printable returns data as text if it reads as a short line of text.
func printable(data []byte) string {
	s := string(data)
	if len(s) == 0 {
		return ""
	}
	if !utf8.ValidString(s) || len(s) > 80 || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return fmt.Sprintf("(%d bytes)", len(data))
	}
	return s
}

// sidRE finds the session ids in the answer to "cons".
var sidRE = regexp.MustCompile(`sid=0x([0-9a-f]+)`)

// liveSessions asks every server which sessions are connected to it.
func liveSessions(ctx context.Context, servers []string) (map[int64]bool, error) {
	live := map[int64]bool{}
	for _, s := range servers {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		out, err := zktest.FourLetter(cctx, s, "cons")
		cancel()
		if err != nil {
			return nil, fmt.Errorf("cons on %s: %w", s, err)
		}
		if !strings.Contains(out, "sid=") {
			return nil, fmt.Errorf("%s did not list its connections (is \"cons\" in 4lw.commands.whitelist?)", s)
		}
		for _, m := range sidRE.FindAllStringSubmatch(out, -1) {
			id, err := strconv.ParseUint(m[1], 16, 64)
			if err == nil {
				live[int64(id)] = true
			}
		}
	}
	return live, nil
}

func (in *inspection) print(a *app) {
	w := a.stdout
	switch {
	case !in.Exists:
		fmt.Fprintf(w, "%s: does not exist (nobody holds or waits)\n", in.Path)
	case len(in.Contenders) == 0:
		fmt.Fprintf(w, "%s: no contenders (nobody holds or waits)\n", in.Path)
	default:
		fmt.Fprintf(w, "%s: %s, %d in queue\n", in.Path, in.Recipe, len(in.Contenders))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "POS\tSTATE\tKIND\tWAITS FOR\tID\tSESSION\tQUEUED\tNOTE")
		for _, cv := range in.Contenders {
			waits, id, note := "-", cv.ID, ""
			if cv.WaitsFor > 0 {
				waits = "#" + strconv.Itoa(cv.WaitsFor)
			}
			if id == "" {
				id = "-"
			}
			if cv.Orphaned != nil && *cv.Orphaned {
				note = "ORPHANED? session not connected"
			}
			if cv.owner == 0 {
				note = "not ephemeral: stays until deleted"
			}
			fmt.Fprintf(tw, "#%d\t%s\t%s\t%s\t%s\t%s\t%v\t%s\n", cv.Pos, cv.State, cv.Kind, waits, id, cv.Session, cv.Queued, note)
		}
		tw.Flush()
		if !in.SessionsKnown {
			fmt.Fprintf(w, "could not look for orphaned nodes: %s\n", in.Why)
		}
	}
	if len(in.Others) > 0 {
		fmt.Fprintf(w, "other children (not contenders): %s\n", strings.Join(in.Others, ", "))
	}
}
