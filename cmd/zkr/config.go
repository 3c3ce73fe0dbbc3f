package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The ensemble's membership: config shows it, reconfig changes it
// (ZooKeeper 3.5+'s dynamic reconfiguration).

// configView is an ensemble configuration as config --json and reconfig
// --json print it. The version is in hex, as ZooKeeper writes it in the
// configuration and as --from-config takes it.
type configView struct {
	Version string       `json:"version"`
	Server  string       `json:"server"`
	Members []memberView `json:"members"`
}

// memberView is one server of a configView.
type memberView struct {
	ID     int64  `json:"id"`
	Role   string `json:"role"`
	Client string `json:"client"`
	Quorum string `json:"quorum"`
}

func viewConfig(cfg zkclient.EnsembleConfig, server string) configView {
	v := configView{Version: strconv.FormatInt(cfg.Version, 16), Server: server, Members: []memberView{}}
	for _, m := range cfg.Members {
		v.Members = append(v.Members, memberView{ID: m.ID, Role: m.Role, Client: m.Client, Quorum: m.Quorum})
	}
	return v
}

// printConfig prints cfg as a table (or one line of JSON), headed by its
// version; the member zkr is connected to is marked.
func (a *app) printConfig(cfg zkclient.EnsembleConfig, server string, asJSON bool) error {
	if asJSON {
		return a.printJSON(viewConfig(cfg, server))
	}
	fmt.Fprintf(a.stdout, "version %x\n", cfg.Version)
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tCLIENT\tQUORUM\t")
	for _, m := range cfg.Members {
		client := m.Client
		if client == "" {
			client = "-"
		} else if client == server {
			client += " *"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t\n", m.ID, m.Role, client, m.Quorum)
	}
	return tw.Flush()
}

// configError words the errors of getConfig and reconfig for an operator.
func configError(what string, err error) error {
	hint := ""
	switch {
	case errors.Is(err, zkclient.ErrReconfigDisabled):
		hint = " (the servers run with reconfigEnabled=false, ZooKeeper's default: set reconfigEnabled=true in their zoo.cfg)"
	case errors.Is(err, zkclient.ErrUnimplemented):
		hint = " (a standalone server cannot be reconfigured; ZooKeeper 3.5 or later, in an ensemble, can)"
	case errors.Is(err, zkclient.ErrNoAuth):
		hint = " (only the super user, or a session the ACL of " + zkclient.ConfigPath + " lets write, may reconfigure; see --auth)"
	case errors.Is(err, zkclient.ErrNewConfigNoQuorum):
		hint = " (a quorum of the new configuration must be running and synced with the leader: start the new servers first, listing the current members and themselves)"
	case errors.Is(err, zkclient.ErrReconfigInProgress):
		hint = " (another reconfig is under way; try again once it is done)"
	case errors.Is(err, zkclient.ErrBadArguments):
		var op *zkclient.OpError
		if errors.As(err, &op) && op.Err == zkclient.ErrBadArguments {
			// The server's refusal, not zkclient's check of a line.
			hint = " (the servers refused the new configuration: it must keep at least 2 participants, and name each server once, with addresses of its own)"
			break
		}
		return withCode(exitUsage, fmt.Errorf("%s: %w", what, err))
	}
	return withCode(exitFailure, fmt.Errorf("%s: %w%s", what, err, hint))
}

func (a *app) newConfigCmd() *cobra.Command {
	var asJSON, watch bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the ensemble's configuration: its members and their roles",
		Long: `Print the ensemble's configuration as the server zkr is connected to knows it
after a sync (ZooKeeper 3.5+'s getConfig, the node /zookeeper/config): its
version (hex, as ZooKeeper writes it and reconfig --from-config takes it), then
one line per member: its id, role (participant or observer), client address
(marked * for the server zkr is connected to) and quorum addresses. With
--json, print {version, server, members: [{id, role, client, quorum}]}. With
--watch, print it again each time a reconfig changes it, until interrupted.
An ensemble without dynamic reconfiguration, or a standalone server, has an
empty configuration (version 0, no members).`,
		Example: `  zkr config
  zkr --servers zk1:2181 config --json
  zkr config --watch`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var interrupted error
			if !watch {
				interrupted = codef(exitFailure, "config: interrupted")
			}
			return a.session(cmd, interrupted, func(ctx context.Context, s *zkrecipes.Session) error {
				c := s.Client()
				if err := c.Sync(ctx, zkclient.ConfigPath); err != nil {
					return configError("config", err)
				}
				if !watch {
					cfg, err := c.Config(ctx)
					if err != nil {
						return configError("config", err)
					}
					return a.printConfig(cfg, s.Server(), asJSON)
				}
				return a.watchConfig(ctx, c, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&watch, "watch", false, "print the configuration again each time it changes, until interrupted")
	return cmd
}

// watchConfig prints the configuration, then each new version of it.
// A connection lost meanwhile is waited out: the watch is set again on
// the next read, which shows any change missed.
func (a *app) watchConfig(ctx context.Context, c *zkclient.Client, asJSON bool) error {
	last := int64(-1)
	for {
		cfg, w, err := c.ConfigW(ctx)
		if errors.Is(err, zkclient.ErrConnectionLoss) && ctx.Err() == nil {
			if err := c.WaitConnected(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return configError("config", err)
		}
		if cfg.Version != last {
			if last != -1 && !asJSON {
				fmt.Fprintln(a.stdout)
			}
			last = cfg.Version
			if err := a.printConfig(cfg, c.Server(), asJSON); err != nil {
				return err
			}
		}
		select {
		case <-w.Event():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (a *app) newReconfigCmd() *cobra.Command {
	var add, remove, members []string
	var from string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "reconfig",
		Short: "Change the ensemble's membership: add, remove or replace servers",
		Long: `Change the ensemble's configuration with ZooKeeper 3.5+'s dynamic
reconfiguration, then print the new one as config does. Incrementally: --add
adds a server, or changes one already there (its role, its addresses), given
as a server line server.N=host:peerPort:electionPort[:role];[clientHost:]clientPort;
--remove removes the server with that id. Or in bulk: --members lists every
server line of the new configuration. Each flag may be repeated or take a
comma-separated list.

The change applies to the configuration of version --from-config (hex, as
config prints it) and fails if it has moved on; without it, to the version
zkr reads first. A server added must be running already, started with a
configuration that lists the current members and itself, and a quorum of the
new configuration must be running and synced. The servers must run with
reconfigEnabled=true, and the session must be allowed to write
/zookeeper/config: the super user (--auth super:PASSWORD, with the servers'
zookeeper.DigestAuthenticationProvider.superDigest), or an ACL granting it.

Removing the leader or the server zkr is connected to may cut the connection
before the answer: zkr then reconnects to a member of the configuration it
read first and reads the configuration again to tell whether the change
applied; it did if the version moved on.`,
		Example: `  zkr --auth super:secret reconfig --add 'server.4=10.0.0.4:2888:3888;2181'
  zkr --auth super:secret reconfig --remove 3 --from-config 100000000
  zkr --auth super:secret reconfig --members 'server.1=zk1:2888:3888;2181,server.2=zk2:2888:3888;2181,server.4=zk4:2888:3888;2181'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			add, members = splitList(add), splitList(members)
			var ids []int64
			for _, r := range splitList(remove) {
				id, err := strconv.ParseInt(r, 10, 64)
				if err != nil || id < 0 {
					return usagef("--remove %q: a server id is a number (the N of server.N)", r)
				}
				ids = append(ids, id)
			}
			switch {
			case len(members) > 0 && (len(add) > 0 || len(ids) > 0):
				return usagef("--members replaces the whole configuration: give it alone, or use --add and --remove")
			case len(members) == 0 && len(add) == 0 && len(ids) == 0:
				return usagef("nothing to change: give --add, --remove or --members")
			}
			version := int64(-1)
			if from != "" {
				v, err := strconv.ParseInt(strings.TrimPrefix(strings.ToLower(from), "0x"), 16, 64)
				if err != nil || v < 0 {
					return usagef("--from-config %q: a configuration version is a hex number, as zkr config prints it", from)
				}
				version = v
			}
			return a.session(cmd, codef(exitFailure, "reconfig: interrupted"), func(ctx context.Context, s *zkrecipes.Session) error {
				cfg, err := a.reconfig(ctx, cmd, s.Client(), add, ids, members, version)
				if err != nil {
					return err
				}
				return a.printConfig(cfg, s.Server(), asJSON)
			})
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&add, "add", nil, "add (or change) a server: server.N=host:peerPort:electionPort[:role];[clientHost:]clientPort")
	f.StringArrayVar(&remove, "remove", nil, "remove the server with this id")
	f.StringArrayVar(&members, "members", nil, "the new configuration's server lines, replacing every member (a bulk reconfig)")
	f.StringVar(&from, "from-config", "", "apply only to this configuration version (hex, as zkr config prints it); default: the version zkr reads first")
	f.BoolVar(&asJSON, "json", false, "print the new configuration as JSON")
	return cmd
}

// reconfig applies the change from version (-1: the current one, read
// first) and returns the new configuration.
func (a *app) reconfig(ctx context.Context, cmd *cobra.Command, c *zkclient.Client, add []string, remove []int64, members []string, version int64) (zkclient.EnsembleConfig, error) {
	if err := c.Sync(ctx, zkclient.ConfigPath); err != nil {
		return zkclient.EnsembleConfig{}, configError("reconfig: reading the configuration", err)
	}
	cur, err := c.Config(ctx)
	if err != nil {
		return zkclient.EnsembleConfig{}, configError("reconfig: reading the configuration", err)
	}
	if len(cur.Members) == 0 {
		return zkclient.EnsembleConfig{}, codef(exitFailure, "reconfig: the server at %s has no dynamic configuration (a standalone server, or ZooKeeper before 3.5)", c.Server())
	}
	if version == -1 {
		version = cur.Version
	} else if version != cur.Version {
		return zkclient.EnsembleConfig{}, codef(exitFailure, "reconfig: the configuration is at version %x, not --from-config %x: it changed since; see zkr config", cur.Version, version)
	}
	var cfg zkclient.EnsembleConfig
	if len(members) > 0 {
		cfg, err = c.ReconfigMembers(ctx, members, version)
	} else {
		cfg, err = c.Reconfig(ctx, add, remove, version)
	}
	if errors.Is(err, zkclient.ErrConnectionLoss) && ctx.Err() == nil {
		// The server zkr was on may be gone: reconnect to any member
		// of the configuration read first.
		a.logf(cmd, "connection lost before the answer; reconnecting to tell whether the change applied")
		if err := c.SetServers(slices.Concat(c.Servers(), cur.Servers())); err != nil {
			return zkclient.EnsembleConfig{}, configError("reconfig", err)
		}
		cfg, applied, err := c.Reconfigured(ctx, version)
		switch {
		case err != nil:
			return cfg, configError("reconfig: the connection was lost before the answer, and reading the configuration again failed, so whether the change applied is unknown", err)
		case !applied:
			return cfg, codef(exitFailure, "reconfig: the connection was lost before the answer, and the configuration is still version %x: the change did not apply; run it again", version)
		}
		return cfg, nil
	}
	if errors.Is(err, zkclient.ErrBadVersion) {
		if now, err := c.Config(ctx); err == nil {
			return cfg, codef(exitFailure, "reconfig: the configuration is at version %x, not %x: it changed since; see zkr config", now.Version, version)
		}
	}
	if err != nil {
		return cfg, configError("reconfig", err)
	}
	return cfg, nil
}

// splitList splits each comma-separated value and drops empty ones.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
