package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

// electFlags are zkr elect's options.
type electFlags struct {
	id      string
	observe bool
	timeout time.Duration
	grace   time.Duration
	requeue requeueFlags
}

func (a *app) newElectCmd() *cobra.Command {
	var f electFlags
	cmd := &cobra.Command{
		Use:   "elect PATH --id ID -- COMMAND [ARG...]",
		Short: "Run a command only while leader; or observe who leads",
		Long: `Campaign in the leader election on PATH under the id ID, run COMMAND once
leader, and resign when it exits; zkr then exits with COMMAND's status.

The election is zkrecipes' Election (Apache Curator's LeaderLatch layout; the node
holds ID, so Java and Go participants can share an election). Only the next
candidate in line is woken when a leader goes.

If leadership is lost while COMMAND runs (the session is strict: connection down
for half the session timeout, session expired, or the node deleted), COMMAND is
sent SIGTERM, then SIGKILL after --grace, and zkr exits with status 5. COMMAND
gets ZKR_ID, ZKR_PATH and ZKR_FENCING_TOKEN.

With --requeue, zkr campaigns again after a loss instead of exiting (on a new
session after an expiry, after a pause that grows from 100 ms to 5 s while
attempts keep failing), and runs a new COMMAND, with the new leadership's
larger ZKR_FENCING_TOKEN, each time it leads: Apache Curator's LeaderSelector
with autoRequeue. --restart says what a COMMAND that exits on its own does:
on-failure (the default) resigns and campaigns again after a non-zero status
and ends zkr with status 0 after 0; always campaigns again after every exit;
never ends zkr with COMMAND's status. SIGINT or SIGTERM stops COMMAND (SIGTERM,
then SIGKILL after --grace), resigns and exits with status 0.

With --observe, zkr takes no part: it prints the leader's id (or "no leader")
now and at every change, until interrupted.

Exit status: COMMAND's own, or 2 bad input, 3 --timeout expired, 5 leadership
lost, 6 no connection to ZooKeeper, 126/127 COMMAND cannot be run / not found.`,
		Example: `  zkr elect /services/mailer --id "$(hostname)" -- ./mailer --serve
  zkr elect /services/mailer --id "$(hostname)" --requeue --restart always -- ./mailer --serve
  zkr elect /services/mailer --observe`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.observe {
				if cmd.ArgsLenAtDash() >= 0 || len(args) > 1 {
					return usagef("--observe runs no command")
				}
				return onePath(cmd, args)
			}
			if f.id == "" {
				return usagef("--id is required to campaign (or use --observe)")
			}
			return pathAndCommand(false)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.observe {
				return a.observe(cmd, args[0])
			}
			return a.elect(cmd, f, args[0], args[1:])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.id, "id", "", "this participant's id, stored in its node (shown by observe and inspect)")
	fl.BoolVar(&f.observe, "observe", false, "print leader changes instead of campaigning")
	fl.DurationVar(&f.timeout, "timeout", 0, "give up after campaigning this long without leading (exit status 3); 0 waits forever")
	fl.DurationVar(&f.grace, "grace", 10*time.Second, "after leadership is lost, time between SIGTERM and SIGKILL to COMMAND")
	addRequeueFlags(cmd, &f.requeue, "campaign")
	return cmd
}

func (a *app) elect(cmd *cobra.Command, f electFlags, path string, argv []string) error {
	switch {
	case f.timeout < 0 || f.grace < 0:
		return usagef("--timeout and --grace must not be negative")
	case f.requeue.requeue && f.timeout != 0:
		return usagef("--requeue and --timeout exclude each other")
	}
	what := "leadership of " + path
	return a.hold(cmd, holdSpec{
		path:    path,
		what:    what,
		doing:   "campaigning for " + what,
		waitLog: fmt.Sprintf("campaigning for %s as %q", path, f.id),
		heldLog: "leading " + path,
		timeout: f.timeout,
		grace:   f.grace,
		env:     []string{"ZKR_ID=" + f.id},
		take: func(ctx context.Context, s *zkrecipes.Session) (taken, error) {
			e := zkrecipes.NewElection(s, path, f.id)
			if err := e.Campaign(ctx); err != nil {
				return taken{}, err
			}
			return taken{release: e.Resign, lost: e.Lost(), token: e.Token()}, nil
		},
		requeue: f.requeue,
		supervise: func(ctx context.Context, newSession func(context.Context) (*zkrecipes.Session, error), work func(context.Context) error, opts ...zkrecipes.SuperviseOption) error {
			return zkrecipes.RunWhileLeader(ctx, newSession, path, f.id, work, opts...)
		},
	}, argv)
}

// observe prints the leader of path at once and at every change.
func (a *app) observe(cmd *cobra.Command, path string) error {
	sigs := catchSignals()
	defer sigs.release()
	s, err := a.connectOrSignal(cmd.Context(), sigs, false)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, stop := sigs.cancelOn(cmd.Context())
	defer stop()
	// The observer's id is never written: Observe only reads.
	e := zkrecipes.NewElection(s, path, "zkr-observer")
	leaders, err := e.Observe(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return recipeError("observing "+path, err)
	}
	defer leaders.Close()
	a.metrics.readyUntil(nil, "")
	for {
		id, err := leaders.Next(ctx)
		switch {
		case ctx.Err() != nil:
			return nil // interrupted: the normal end
		case err != nil:
			return recipeError("observing "+path, err)
		}
		line := "leader " + id
		if id == "" {
			line = "no leader"
		}
		fmt.Fprintf(a.stdout, "%s %s\n", time.Now().Format(time.RFC3339), line)
	}
}
