package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
)

func (a *app) newInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect PATH",
		Short: "Show the recipe at a path: a lock's or election's queue, a semaphore, a queue, a group...",
		Long: `Show the contenders queued under PATH, a lock (zkr lock, Curator's
InterProcessMutex, kazoo's Lock), a read/write lock (zkr lock --shared, Curator's
InterProcessReadWriteLock, kazoo's ReadLock/WriteLock) or an election (zkr elect,
Curator's LeaderLatch), in their order: who holds or leads, who waits and for
whom, each one's id (the node's data), its session, how long ago it queued,
and the layout of its node's name, which tells which client made it: curator
("_c_<uuid>-lock-<seq>" and the like: Curator's, which zkr writes too) or kazoo
("<id>__lock__<seq>", "<id>__rlock__<seq>"); "+grants" marks a zkrecipes
contender that takes grants (a version-8 UUID: see zkrecipes.WithGrants), to which a holder of
its kind hands the lock over in the multi that deletes its own node.

PATH may also be, recognised from its nodes' layout:
  a semaphore (Curator's InterProcessSemaphoreV2): the leases held, each
      one's data and session; the permits, if recorded (zkrecipes records
      them, Curator does not); the acquirers queued on its mutex;
  a work queue (Curator's SimpleDistributedQueue "qn-", kazoo's Queue
      "entry-"): its length and the first 100 items, in the order consumers
      take them;
  a locking queue (kazoo's LockingQueue): its items, each taken (by whom)
      or queued;
  a service (Curator's ServiceDiscovery, zkr register): its instances,
      address:port, disabled ones said so;
  a double barrier whose participants all entered ("ready" is there);
  a group (Curator's GroupMember, zkr join): its members (ephemeral
      children without sequence numbers) and their data. A double barrier
      still filling up reads as a group; a plain barrier (a node that is
      there or not) is not recognised.

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
	Kind     string        `json:"kind"`             // mutex, reader, writer, candidate
	Layout   string        `json:"layout,omitempty"` // curator, kazoo: the naming of the node (zkrecipes.Contender.Layout)
	Grants   bool          `json:"grants,omitempty"` // it takes grants (see zkrecipes.WithGrants)
	State    string        `json:"state"`            // holds, leads, waits
	WaitsFor int           `json:"waits_for,omitempty"`
	ID       string        `json:"id,omitempty"`
	Session  string        `json:"session"` // "0x…", or "persistent"
	Created  time.Time     `json:"created"`
	Queued   time.Duration `json:"queued_ns"`
	Orphaned *bool         `json:"orphaned,omitempty"` // unset: could not tell
	TakenBy  string        `json:"taken_by,omitempty"` // a locking queue's item: the consumer's id

	owner int64
}

// inspection is the queue under one path.
type inspection struct {
	Path       string          `json:"path"`
	Exists     bool            `json:"exists"`
	Recipe     string          `json:"recipe"`
	Contenders []contenderView `json:"contenders"`
	Permits    int             `json:"permits,omitempty"` // a semaphore's, if recorded
	Length     int             `json:"length,omitempty"`  // a queue's items (more than shown, maybe)
	Others     []string        `json:"other_children"`
	// SessionsKnown tells whether orphans could be looked for; Why says
	// why not.
	SessionsKnown bool   `json:"sessions_known"`
	Why           string `json:"sessions_unknown_because,omitempty"`
}

func (a *app) inspect(cmd *cobra.Command, path string, asJSON bool) error {
	ctx := cmd.Context()
	s, err := a.connect(ctx, false)
	if err != nil {
		return err
	}
	defer closeSession(s)
	v, err := zkrecipes.Inspect(ctx, s, path)
	if err != nil {
		return recipeError("inspecting "+path, err)
	}
	in := newInspection(v, time.Now())
	if len(in.Contenders) == 0 && len(v.Others) > 0 {
		// Not a line of contenders: another recipe's layout, maybe.
		other, err := recognise(ctx, serverReader{s}, path, v.Others, time.Now())
		if err != nil {
			return recipeError("inspecting "+path, err)
		}
		if other != nil {
			in = other
		}
	}
	if len(in.Contenders) > 0 {
		servers, _, _, _ := a.serverList() // checked by connect
		tlsCfg, _ := a.tlsConfig()
		live, err := liveSessions(ctx, servers, tlsCfg)
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

// kindRecipe names the recipe that queues each kind of contender.
var kindRecipe = map[string]string{
	"mutex":     "lock",
	"reader":    "read/write lock",
	"writer":    "read/write lock",
	"candidate": "election",
}

// newInspection shows the queue v as it stands at now.
func newInspection(v zkrecipes.Contenders, now time.Time) *inspection {
	in := &inspection{
		Path:       v.Path,
		Exists:     v.Exists,
		Recipe:     "none",
		Contenders: make([]contenderView, 0, len(v.Entries)),
		Others:     append([]string{}, v.Others...),
	}
	for i, e := range v.Entries {
		cv := contenderView{
			Pos:     i + 1,
			Node:    e.Node,
			Seq:     int64(e.Seq),
			Kind:    e.Kind,
			Layout:  e.Layout,
			Grants:  e.Grants,
			ID:      printable(e.Data),
			Session: fmt.Sprintf("0x%x", e.Owner),
			Created: e.Created,
			Queued:  max(now.Sub(e.Created), 0).Round(100 * time.Millisecond),
			owner:   e.Owner,
		}
		switch {
		case !e.Holds:
			cv.State, cv.WaitsFor = "waits", e.WaitsFor+1
		case e.Kind == "candidate":
			cv.State = "leads"
		default:
			cv.State = "holds"
		}
		if e.Owner == 0 {
			cv.Session = "persistent"
		}
		switch r := kindRecipe[e.Kind]; in.Recipe {
		case "none":
			in.Recipe = r
		case r:
		default:
			in.Recipe = "mixed"
		}
		in.Contenders = append(in.Contenders, cv)
	}
	return in
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

// liveSessions asks every server which sessions are connected to it, over
// TLS with tlsCfg (on the secure client port) if it is not nil.
func liveSessions(ctx context.Context, servers []string, tlsCfg *tls.Config) (map[int64]bool, error) {
	live := map[int64]bool{}
	var opts []zkadmin.Option
	if tlsCfg != nil {
		opts = append(opts, zkadmin.WithTLS(tlsCfg))
	}
	for _, s := range servers {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		conns, err := zkadmin.Cons(cctx, s, opts...)
		cancel()
		if errors.Is(err, zkadmin.ErrNotAllowed) {
			return nil, fmt.Errorf("%s did not list its connections (is \"cons\" in 4lw.commands.whitelist?)", s)
		}
		if err != nil {
			return nil, fmt.Errorf("cons on %s: %w", s, err)
		}
		for _, c := range conns {
			if c.SessionID != 0 {
				live[c.SessionID] = true
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
	case len(in.Contenders) == 0 && in.Recipe == "none":
		fmt.Fprintf(w, "%s: no contenders (nobody holds or waits)\n", in.Path)
	default:
		fmt.Fprintf(w, "%s: %s\n", in.Path, in.summary())
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "POS\tSTATE\tKIND\tWAITS FOR\tID\tSESSION\tQUEUED\tLAYOUT\tNOTE")
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
			if cv.owner == 0 && cv.Kind != "item" {
				note = "not ephemeral: stays until deleted"
			}
			if cv.TakenBy != "" {
				note = "taken by " + cv.TakenBy
			}
			layout := cv.Layout
			if layout == "" {
				layout = "-"
			}
			if cv.Grants {
				layout += "+grants"
			}
			fmt.Fprintf(tw, "#%d\t%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", cv.Pos, cv.State, cv.Kind, waits, id, cv.Session, cv.Queued, layout, note)
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

// summary says what the recipe is and how many it has in line, hold,
// queue or count.
func (in *inspection) summary() string {
	n := len(in.Contenders)
	count := func(state string) int {
		c := 0
		for _, cv := range in.Contenders {
			if cv.State == state {
				c++
			}
		}
		return c
	}
	switch in.Recipe {
	case "semaphore":
		permits := "permits not recorded (Curator's)"
		if in.Permits > 0 {
			permits = strconv.Itoa(in.Permits) + " permits"
		}
		return fmt.Sprintf("semaphore, %d leases held (%s), %d waiting", count("holds"), permits, count("waits"))
	case "queue", "locking queue":
		s := fmt.Sprintf("%s, %d items", in.Recipe, in.Length)
		if in.Recipe == "locking queue" {
			s += fmt.Sprintf(" (%d taken)", count("taken"))
		}
		if in.Length > n {
			s += fmt.Sprintf(", the first %d shown", n)
		}
		return s
	case "group":
		return fmt.Sprintf("group, %d members", n)
	case "service":
		return fmt.Sprintf("service, %d instances", n)
	case "double barrier":
		return fmt.Sprintf("double barrier, %d entered, ready", n)
	}
	return fmt.Sprintf("%s, %d in queue", in.Recipe, n)
}
