package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

func (a *app) newMembersCmd() *cobra.Command {
	var watch, asJSON bool
	cmd := &cobra.Command{
		Use:   "members PATH",
		Short: "List the members of a group, and follow changes with --watch",
		Long: `List the members of the group on PATH, one per line: the member's id, then
a tab and its data if it has any. A group is the layout of Apache Curator's
GroupMember and of zkr join: every child of PATH is a member, named by its id,
holding its data. A group that does not exist has no members.

With --watch, print the whole list again, after a timestamp line, whenever a
member joins, leaves or changes its data, until interrupted.`,
		Example: `  zkr members /services/mailer
  zkr members /services/mailer --watch
  zkr members /services/mailer --json`,
		Args: onePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.members(cmd, args[0], watch, asJSON)
		},
	}
	cmd.Flags().BoolVar(&watch, "watch", false, "print the members again at every change, until interrupted")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: a list of {id, data} (one list per line with --watch)")
	return cmd
}

// member is a group member as zkr shows it.
type member struct {
	ID   string `json:"id"`
	Data string `json:"data"`
}

func (a *app) members(cmd *cobra.Command, path string, watch, asJSON bool) error {
	sigs := catchSignals()
	defer sigs.release()
	ctx, stop := sigs.cancelOn(cmd.Context())
	defer stop()
	c, err := a.dialRaw(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer c.close()

	show := func(ms []member) {
		switch {
		case asJSON:
			b, _ := json.Marshal(ms) // strings only: cannot fail
			fmt.Fprintf(a.stdout, "%s\n", b)
		case watch:
			fmt.Fprintf(a.stdout, "%s %d members\n", time.Now().Format(time.RFC3339), len(ms))
			fallthrough
		default:
			for _, m := range ms {
				if m.Data == "" {
					fmt.Fprintln(a.stdout, m.ID)
				} else {
					fmt.Fprintf(a.stdout, "%s\t%s\n", m.ID, m.Data)
				}
			}
		}
	}
	if !watch {
		ms, err := readMembers(c, path)
		if err != nil {
			return zkError("members of "+path, path, err)
		}
		if ms == nil {
			ms = []member{}
		}
		show(ms)
		return nil
	}
	w := &groupWatcher{c: c, path: path, fired: make(chan string), done: ctx.Done(), pending: map[string]bool{}}
	var last []member
	for first := true; ; first = false {
		ms, err := w.read()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, zk.ErrInvalidPath) {
				return zkError("members of "+path, path, err)
			}
			a.logf(cmd, "reading %s: %v; trying again", path, err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		if first || !slices.Equal(ms, last) {
			show(ms)
			last = ms
		}
		if err := w.wait(); err != nil {
			return nil // interrupted
		}
	}
}

// readMembers lists the members of path, sorted by id; nil if there is no
// group there.
func readMembers(c *rawConn, path string) ([]member, error) {
	kids, _, err := c.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(kids)
	ms := make([]member, 0, len(kids))
	for _, k := range kids {
		data, _, err := c.Get(path + "/" + k)
		if errors.Is(err, zk.ErrNoNode) {
			continue // left between listing and reading
		}
		if err != nil {
			return nil, err
		}
		ms = append(ms, member{ID: k, Data: string(data)})
	}
	return ms, nil
}

// groupWatcher follows a group: one watch on the group's children (or on
// its creation) and one on each member's data, each set again only after it
// fired, so that following a group for long costs no more than its size.
type groupWatcher struct {
	c       *rawConn
	path    string
	fired   chan string     // the key of each watch that fired
	done    <-chan struct{} // stop
	pending map[string]bool // keys of the watches set: "/" children, "?" creation, else member ids
}

// arm counts the watch ch under key until it fires.
func (w *groupWatcher) arm(key string, ch <-chan zk.Event) {
	w.pending[key] = true
	go func() {
		<-ch
		select {
		case w.fired <- key:
		case <-w.done:
		}
	}()
}

// wait returns once a watch fired (and any that fired with it), or with an
// error when the watcher is stopped.
func (w *groupWatcher) wait() error {
	select {
	case key := <-w.fired:
		delete(w.pending, key)
	case <-w.done:
		return context.Canceled
	}
	for {
		select {
		case key := <-w.fired:
			delete(w.pending, key)
		default:
			return nil
		}
	}
}

// read lists the members, sorted by id, and sets the watches that are not
// pending.
func (w *groupWatcher) read() ([]member, error) {
	for {
		var kids []string
		var err error
		if w.pending["/"] {
			kids, _, err = w.c.Children(w.path)
		} else {
			var ch <-chan zk.Event
			kids, _, ch, err = w.c.ChildrenW(w.path)
			if err == nil {
				w.arm("/", ch)
			}
		}
		if errors.Is(err, zk.ErrNoNode) {
			if w.pending["?"] {
				return []member{}, nil
			}
			ok, _, ch, err := w.c.ExistsW(w.path)
			if err != nil {
				return nil, err
			}
			w.arm("?", ch)
			if ok {
				continue // created meanwhile
			}
			return []member{}, nil
		}
		if err != nil {
			return nil, err
		}
		slices.Sort(kids)
		ms := make([]member, 0, len(kids))
		for _, k := range kids {
			p := w.path + "/" + k
			var data []byte
			if w.pending[k] {
				data, _, err = w.c.Get(p)
			} else {
				var ch <-chan zk.Event
				data, _, ch, err = w.c.GetW(p)
				if err == nil {
					w.arm(k, ch)
				}
			}
			if errors.Is(err, zk.ErrNoNode) {
				continue // left meanwhile; the children watch has fired
			}
			if err != nil {
				return nil, err
			}
			ms = append(ms, member{ID: k, Data: string(data)})
		}
		return ms, nil
	}
}

// joinFlags are zkr join's options.
type joinFlags struct {
	id    string
	data  string
	grace time.Duration
}

func (a *app) newJoinCmd() *cobra.Command {
	var f joinFlags
	cmd := &cobra.Command{
		Use:   "join PATH --id ID [--data S] [-- COMMAND [ARG...]]",
		Short: "Be a member of a group while a command runs",
		Long: `Join the group on PATH as the member ID, publishing S as its data (Apache
Curator's GroupMember layout: an ephemeral node PATH/ID), then run COMMAND and
leave when it exits; zkr exits with COMMAND's status. Without COMMAND, stay a
member until interrupted (SIGINT, SIGTERM), then leave and exit with status 0.

If the membership is lost (the session is strict: connection down for half the
session timeout, session expired, or the node deleted), COMMAND is sent SIGTERM,
then SIGKILL after --grace, and zkr exits with status 5. COMMAND gets ZKR_ID,
ZKR_PATH and ZKR_FENCING_TOKEN (0: memberships have no token).

Exit status: COMMAND's own, or 2 bad input, 4 member id taken, 5 membership
lost, 6 no connection to ZooKeeper, 126/127 COMMAND cannot be run / not found.`,
		Example: `  zkr join /services/mailer --id "$(hostname)" --data "$(hostname):8025" -- ./mailer
  zkr join /workers --id w1`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.id == "" {
				return usagef("--id is required")
			}
			return pathAndCommand(true)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.join(cmd, f, args[0], args[1:])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.id, "id", "", "member id: the name of this member's node (one path segment)")
	fl.StringVar(&f.data, "data", "", "data to publish with the membership")
	fl.DurationVar(&f.grace, "grace", 10*time.Second, "after the membership is lost, time between SIGTERM and SIGKILL to COMMAND")
	return cmd
}

func (a *app) join(cmd *cobra.Command, f joinFlags, path string, argv []string) error {
	if f.grace < 0 {
		return usagef("--grace %v: must not be negative", f.grace)
	}
	sigs := catchSignals()
	defer sigs.release()
	ctx := cmd.Context()
	s, err := a.connectOrSignal(ctx, sigs, true)
	if err != nil {
		return err
	}
	defer closeSession(s)

	what := fmt.Sprintf("membership %q of %s", f.id, path)
	var g *zkrecipes.Group
	sig, err := waitFor(ctx, sigs, func(ctx context.Context) error {
		var err error
		g, err = zkrecipes.JoinGroup(ctx, s, path, f.id, []byte(f.data))
		return err
	})
	if err == nil {
		defer release(cmd, a, s, what, g.Lost(), g.Leave)
	}
	switch {
	case sig != nil:
		return signalled(sig, "joining "+path)
	case errors.Is(err, zkrecipes.ErrMemberExists):
		return codef(exitHeld, "member id %q is taken in %s", f.id, path)
	case err != nil:
		return recipeError("joining "+path, err)
	}
	h := holding{
		what:  what,
		lost:  g.Lost(),
		env:   append(holderEnv(path, 0), "ZKR_ID="+f.id),
		grace: f.grace,
	}
	if len(argv) > 0 {
		return a.runHeld(cmd, s, h, sigs, argv)
	}
	fmt.Fprintf(a.stderr, "%s: member %q of %s until interrupted\n", cmd.CommandPath(), f.id, path)
	select {
	case <-sigs.ch:
		return nil
	case <-h.lost:
		return codef(exitLost, "lost %s: %s", what, lossReason(s))
	}
}
