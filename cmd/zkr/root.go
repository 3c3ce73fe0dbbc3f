package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

// defaultServers is used when neither --servers nor $ZKR_SERVERS is set.
const defaultServers = "127.0.0.1:2181"

// app is one run of zkr: its standard streams, its environment and the
// flags every command shares.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	servers        string
	sessionTimeout time.Duration
	connectTimeout time.Duration
	verbose        bool
}

// run executes the command line args and returns zkr's exit status.
func (a *app) run(ctx context.Context, args []string) int {
	root := a.newRootCmd()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return report(a.stderr, cmd, err)
}

func (a *app) newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "zkr",
		Short: "Run commands under ZooKeeper locks and elections, and watch the recipes work",
		Long: `zkr runs commands under ZooKeeper coordination recipes: under a lock, only while
leader, or as a member of a group. It shows the queue behind a lock or an
election, and measures the herd effect that the recipes avoid.

ZooKeeper servers come from --servers, else $ZKR_SERVERS, else ` + defaultServers + `.

` + exitCodesHelp,
		Example: `  zkr demo
  zkr lock /locks/backup -- ./backup.sh
  zkr elect /services/mailer --id "$(hostname)" -- ./mailer
  zkr inspect /locks/backup`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetIn(a.stdin)
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usagef("%w", err) })

	f := root.PersistentFlags()
	f.StringVar(&a.servers, "servers", "", "ZooKeeper servers, comma-separated host:port (default $ZKR_SERVERS, else "+defaultServers+")")
	f.DurationVar(&a.sessionTimeout, "session-timeout", 10*time.Second, "ZooKeeper session timeout to ask for; a holder whose connection is down for half of it counts as lost")
	f.DurationVar(&a.connectTimeout, "connect-timeout", 10*time.Second, "give up connecting to ZooKeeper after this long (exit status 6)")
	f.BoolVarP(&a.verbose, "verbose", "v", false, "log the session's life (connected, suspended, expired) and each step on stderr")

	root.AddCommand(
		a.newLockCmd(),
		a.newElectCmd(),
		a.newMembersCmd(),
		a.newJoinCmd(),
		a.newInspectCmd(),
		a.newDemoCmd(),
		a.newBenchCmd(),
		a.newServerCmd(),
	)
	return root
}

// serverList returns the servers to use and whether the user chose them
// (by flag or environment).
func (a *app) serverList() (servers []string, chosen bool, err error) {
	spec, chosen := a.servers, true
	if spec == "" {
		spec = a.getenv("ZKR_SERVERS")
	}
	if spec == "" {
		spec, chosen = defaultServers, false
	}
	for s := range strings.SplitSeq(spec, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, false, usagef("--servers %q: empty address", spec)
		}
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			// A bare host: ZooKeeper's default client port.
			host, port = s, "2181"
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
			return nil, false, usagef("--servers %q: %q is not host:port", spec, s)
		}
		servers = append(servers, net.JoinHostPort(host, port))
	}
	return servers, chosen, nil
}

// checkTimeouts refuses durations that cannot work.
func (a *app) checkTimeouts() error {
	if a.sessionTimeout <= 0 {
		return usagef("--session-timeout %v: must be positive", a.sessionTimeout)
	}
	if a.connectTimeout <= 0 {
		return usagef("--connect-timeout %v: must be positive", a.connectTimeout)
	}
	return nil
}

// logger returns the logger for the session's life: stderr with -v,
// nothing otherwise.
func (a *app) logger() *slog.Logger {
	if !a.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// logf prints a progress line on stderr with -v.
func (a *app) logf(cmd *cobra.Command, format string, args ...any) {
	if a.verbose {
		fmt.Fprintf(a.stderr, cmd.CommandPath()+": "+format+"\n", args...)
	}
}

// connect opens a session. strict sessions report holdings lost as soon as
// the connection has been down for half the session timeout.
func (a *app) connect(ctx context.Context, strict bool) (*zkrecipes.Session, error) {
	servers, _, err := a.serverList()
	if err != nil {
		return nil, err
	}
	if err := a.checkTimeouts(); err != nil {
		return nil, err
	}
	opts := []zkrecipes.SessionOption{
		zkrecipes.WithSessionTimeout(a.sessionTimeout),
		zkrecipes.WithLogger(a.logger()),
	}
	if strict {
		opts = append(opts, zkrecipes.WithStrict())
	}
	cctx, cancel := context.WithTimeout(ctx, a.connectTimeout)
	defer cancel()
	s, err := zkrecipes.NewSession(cctx, servers, opts...)
	switch {
	case err == nil:
		return s, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return nil, codef(exitConnect, "cannot connect to ZooKeeper at %s within %v (is it running? see --servers)", strings.Join(servers, ","), a.connectTimeout)
	default:
		return nil, withCode(exitConnect, fmt.Errorf("cannot connect to ZooKeeper at %s: %w", strings.Join(servers, ","), err))
	}
}

// pathAndCommand checks the arguments "PATH -- COMMAND [ARG...]"; with
// optional, the command may be left out ("PATH" alone).
func pathAndCommand(optional bool) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		dash := cmd.ArgsLenAtDash()
		switch {
		case len(args) == 0 || dash == 0:
			return usagef("missing PATH")
		case dash == -1 && len(args) == 1 && optional:
			return nil
		case dash == -1 && len(args) == 1:
			return usagef("missing -- COMMAND after PATH")
		case dash == -1:
			return usagef("put -- between PATH and the command (got %q)", args[1:])
		case dash > 1:
			return usagef("expected one PATH before --, got %d: %q", dash, args[:dash])
		case len(args) == 1:
			return usagef("no command after --")
		}
		return nil
	}
}

// onePath checks the arguments "PATH".
func onePath(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return usagef("missing PATH")
	case len(args) > 1:
		return usagef("expected one PATH, got %d: %q", len(args), args)
	}
	return nil
}

// noArgs refuses positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected arguments %q", args)
	}
	return nil
}

// recipeError gives an error from a recipe its exit status: a bad path or
// argument is bad input, reported as the recipe words it; anything else is a
// failure while doing what.
func recipeError(what string, err error) error {
	var e *exitError
	switch {
	case errors.As(err, &e):
		return err
	case errors.Is(err, zkrecipes.ErrInvalidPath), errors.Is(err, zkrecipes.ErrInvalidArgument):
		return withCode(exitUsage, err)
	}
	return withCode(exitFailure, fmt.Errorf("%s: %w", what, err))
}
