package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

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
			return a.session(cmd, nil, func(ctx context.Context, s *zkrecipes.Session) error {
				return a.members(ctx, s, args[0], watch, asJSON)
			})
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

// shown converts the library's members to zkr's.
func shown(ms []zkrecipes.Member) []member {
	out := make([]member, len(ms))
	for i, m := range ms {
		out[i] = member{ID: m.ID, Data: string(m.Data)}
	}
	return out
}

// members prints the members of path; with watch, again at every change,
// until ctx is cancelled.
func (a *app) members(ctx context.Context, s *zkrecipes.Session, path string, watch, asJSON bool) error {
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
	// One read first, to report a bad path or an unreadable group.
	ms, err := zkrecipes.GroupMembers(ctx, s, path)
	if err != nil {
		return recipeError("members of "+path, err)
	}
	last := shown(ms)
	show(last)
	if !watch {
		return nil
	}
	w, err := zkrecipes.WatchGroup(ctx, s, path)
	if err != nil {
		return recipeError("watching members of "+path, err)
	}
	defer w.Close()
	for {
		ms, err := w.Next(ctx)
		if err != nil {
			return recipeError("watching members of "+path, err)
		}
		if cur := shown(ms); !slices.Equal(cur, last) {
			show(cur)
			last = cur
		}
	}
}

// joinFlags are zkr join's options.
type joinFlags struct {
	id      string
	data    string
	grace   time.Duration
	requeue requeueFlags
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

With --requeue, zkr joins again after a loss instead of exiting (on a new
session after an expiry, after a pause that grows from 100 ms to 5 s while
attempts keep failing), and runs a new COMMAND each time it is a member; an id
taken by another session is waited for instead of ending zkr with status 4.
--restart says what a COMMAND that exits on its own does: on-failure (the
default) leaves and joins again after a non-zero status and ends zkr with
status 0 after 0; always joins again after every exit; never ends zkr with
COMMAND's status. SIGINT or SIGTERM stops COMMAND (SIGTERM, then SIGKILL after
--grace), leaves and exits with status 0.

Exit status: COMMAND's own, or 2 bad input, 4 member id taken, 5 membership
lost, 6 no connection to ZooKeeper, 126/127 COMMAND cannot be run / not found.`,
		Example: `  zkr join /services/mailer --id "$(hostname)" --data "$(hostname):8025" -- ./mailer
  zkr join /workers --id w1
  zkr join /workers --id w1 --requeue`,
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
	addRequeueFlags(cmd, &f.requeue, "join")
	return cmd
}

func (a *app) join(cmd *cobra.Command, f joinFlags, path string, argv []string) error {
	if f.grace < 0 {
		return usagef("--grace %v: must not be negative", f.grace)
	}
	return a.hold(cmd, holdSpec{
		path:  path,
		what:  fmt.Sprintf("membership %q of %s", f.id, path),
		doing: "joining " + path,
		grace: f.grace,
		env:   []string{"ZKR_ID=" + f.id},
		idle:  fmt.Sprintf("member %q of %s", f.id, path),
		take: func(ctx context.Context, s *zkrecipes.Session) (taken, error) {
			g, err := zkrecipes.JoinGroup(ctx, s, path, f.id, []byte(f.data))
			switch {
			case errors.Is(err, zkrecipes.ErrMemberExists):
				return taken{}, codef(exitHeld, "member id %q is taken in %s", f.id, path)
			case err != nil:
				return taken{}, err
			}
			return taken{release: g.Leave, lost: g.Lost()}, nil
		},
		requeue: f.requeue,
		supervise: func(ctx context.Context, newSession func(context.Context) (*zkrecipes.Session, error), work func(context.Context) error, opts ...zkrecipes.SuperviseOption) error {
			return zkrecipes.RunAsMember(ctx, newSession, path, f.id, []byte(f.data), work, opts...)
		},
	}, argv)
}
