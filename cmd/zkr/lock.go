package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

// lockFlags are zkr lock's options.
type lockFlags struct {
	timeout time.Duration
	try     bool
	shared  bool
	write   bool
	id      string
	grace   time.Duration
	requeue requeueFlags
}

func (a *app) newLockCmd() *cobra.Command {
	var f lockFlags
	cmd := &cobra.Command{
		Use:   "lock PATH -- COMMAND [ARG...]",
		Short: "Run a command while holding a lock",
		Long: `Wait for the lock on PATH, run COMMAND while holding it, and release it when
COMMAND exits; zkr then exits with COMMAND's status.

The lock is zkrecipes' Mutex (Apache Curator's InterProcessMutex layout). With
--shared or --write it is the read or the write side of zkrecipes' RWMutex
(Curator's InterProcessReadWriteLock): any number of --shared holders run
together, never beside a --write holder or a plain lock holder (a plain lock
counts as a writer of the read/write lock on the same path).

--id is stored in the lock node; zkr inspect shows it.

COMMAND gets ZKR_FENCING_TOKEN, a number that strictly increases from one holder
to the next: pass it to the resource you guard, and have the resource refuse a
token lower than the highest it has seen.

The session is strict: if the connection to ZooKeeper is down for half the
session timeout, the lock counts as lost (another process may get it once the
server expires the session). COMMAND is then sent SIGTERM, then SIGKILL after
--grace, and zkr exits with status 5, saying why. Signals sent to zkr are
forwarded to COMMAND; the lock is released on every way out.

With --requeue (the plain lock only), zkr waits for the lock again after a
loss instead of exiting (on a new session after an expiry, after a pause that
grows from 100 ms to 5 s while attempts keep failing), and runs a new COMMAND,
with the new holding's larger ZKR_FENCING_TOKEN, each time it holds the lock.
--restart says what a COMMAND that exits on its own does: on-failure (the
default) unlocks and locks again after a non-zero status and ends zkr with
status 0 after 0; always locks again after every exit; never ends zkr with
COMMAND's status. SIGINT or SIGTERM stops COMMAND (SIGTERM, then SIGKILL after
--grace), unlocks and exits with status 0.

Exit status: COMMAND's own, or 1 ZooKeeper error (such as an ACL refusing the
credentials), 2 bad input, 3 --timeout expired, 4 lock held (--try), 5 lock
lost, 6 no connection to ZooKeeper, 126/127 COMMAND cannot be run / not found,
128+N zkr killed by signal N while waiting.`,
		Example: `  zkr lock /locks/backup -- ./backup.sh --full
  zkr lock --timeout 30s /locks/deploy -- make deploy
  zkr lock --try /locks/cron-report -- ./report.sh || echo "another report is running"
  zkr lock --shared /locks/schema -- ./read-only-job
  zkr lock --write /locks/schema -- ./migrate
  zkr lock --id "$(hostname)" /locks/backup -- ./backup.sh
  zkr lock --requeue /locks/singleton -- ./worker`,
		Args: pathAndCommand(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.lock(cmd, f, args[0], args[1:])
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.timeout, "timeout", 0, "give up after waiting this long for the lock (exit status 3); 0 waits forever")
	fl.BoolVar(&f.try, "try", false, "do not wait: exit with status 4 if the lock is held or awaited")
	fl.BoolVar(&f.shared, "shared", false, "take the read (shared) side of a read/write lock")
	fl.BoolVar(&f.write, "write", false, "take the write (exclusive) side of a read/write lock; the same exclusion as the plain lock")
	fl.StringVar(&f.id, "id", "", "an id stored in the lock node (shown by zkr inspect)")
	fl.DurationVar(&f.grace, "grace", 10*time.Second, "after the lock is lost, time between SIGTERM and SIGKILL to COMMAND")
	addRequeueFlags(cmd, &f.requeue, "lock")
	return cmd
}

// locker is the lock zkr lock takes: exclusive or shared.
type locker struct {
	lock, try, unlock func(context.Context) error
	token             func() int64
	lost              func() <-chan struct{}
}

func newLocker(s *zkrecipes.Session, path string, f lockFlags) locker {
	var opts []zkrecipes.LockOption
	if f.id != "" {
		opts = append(opts, zkrecipes.WithNodeData([]byte(f.id)))
	}
	switch {
	case f.shared:
		m := zkrecipes.NewRWMutex(s, path, opts...)
		return locker{lock: m.RLock, try: m.TryRLock, unlock: m.RUnlock, token: m.Token, lost: m.Lost}
	case f.write:
		m := zkrecipes.NewRWMutex(s, path, opts...)
		return locker{lock: m.Lock, try: m.TryLock, unlock: m.Unlock, token: m.Token, lost: m.Lost}
	}
	m := zkrecipes.NewMutex(s, path, opts...)
	return locker{lock: m.Lock, try: m.TryLock, unlock: m.Unlock, token: m.Token, lost: m.Lost}
}

func (a *app) lock(cmd *cobra.Command, f lockFlags, path string, argv []string) error {
	switch {
	case f.try && f.timeout != 0:
		return usagef("--try and --timeout exclude each other")
	case f.shared && f.write:
		return usagef("--shared and --write exclude each other")
	case f.timeout < 0:
		return usagef("--timeout %v: must not be negative", f.timeout)
	case f.grace < 0:
		return usagef("--grace %v: must not be negative", f.grace)
	case f.requeue.requeue && (f.try || f.timeout != 0):
		return usagef("--requeue excludes --try and --timeout")
	case f.requeue.requeue && (f.shared || f.write):
		return usagef("--requeue works with the plain lock, not --shared or --write")
	}
	what := "the lock on " + path
	switch {
	case f.shared:
		what = "the shared (read) lock on " + path
	case f.write:
		what = "the write lock on " + path
	}
	return a.hold(cmd, holdSpec{
		path:    path,
		what:    what,
		doing:   "waiting for " + what,
		waitLog: "waiting for " + what,
		heldLog: "holding " + what,
		timeout: f.timeout,
		grace:   f.grace,
		take: func(ctx context.Context, s *zkrecipes.Session) (taken, error) {
			l := newLocker(s, path, f)
			acquire := l.lock
			if f.try {
				acquire = l.try
			}
			err := acquire(ctx)
			switch {
			case errors.Is(err, zkrecipes.ErrLocked):
				return taken{}, codef(exitHeld, "%s is held by another process (--try)", what)
			case err != nil:
				return taken{}, err
			}
			return taken{release: l.unlock, lost: l.lost(), token: l.token()}, nil
		},
		requeue: f.requeue,
		supervise: func(ctx context.Context, newSession func(context.Context) (*zkrecipes.Session, error), work func(context.Context) error, opts ...zkrecipes.SuperviseOption) error {
			if f.id != "" {
				opts = append(opts, zkrecipes.WithLockOptions(zkrecipes.WithNodeData([]byte(f.id))))
			}
			return zkrecipes.RunWhileLocked(ctx, newSession, path, work, opts...)
		},
	}, argv)
}
