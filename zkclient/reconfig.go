package zkclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// ConfigPath is the node where ZooKeeper 3.5+ keeps the ensemble's
// configuration. It is outside any chroot: Config and ConfigW read it
// whatever the client's chroot.
const ConfigPath = "/zookeeper/config"

// EnsembleConfig is the ensemble's membership, as ZooKeeper 3.5+ keeps it
// in ConfigPath and as Config and Reconfig return it.
type EnsembleConfig struct {
	// Version is the configuration's version (its "version=" line, in
	// hex there): the zxid of the reconfig that made it, 0 for a
	// configuration never changed since the ensemble started. Reconfig
	// takes it to change this configuration and no other.
	Version int64
	// Members are the servers, in the order of the node's lines.
	Members []Member
	// Raw is the node's data as the server sent it.
	Raw []byte
	// Stat is the node's Stat.
	Stat Stat
}

// Member is one server of an EnsembleConfig.
type Member struct {
	ID     int64  // the server's id (its myid), N of its "server.N" line
	Quorum string // its quorum (peer and election) addresses, as the line has them
	Role   string // "participant" (votes) or "observer"
	Client string // the "host:port" clients connect to, "" if the line gives none
}

// Servers returns the client addresses of the members that have one, in
// member order: the list to give SetServers.
func (e EnsembleConfig) Servers() []string {
	var s []string
	for _, m := range e.Members {
		if m.Client != "" {
			s = append(s, m.Client)
		}
	}
	return s
}

// ParseConfig parses the data of ConfigPath: "server.N=" lines
// (host:port:port[:role][|host:port:port...][;[clientHost:]clientPort])
// and a "version=" line in hex; other lines (group and weight lines of a
// hierarchical quorum) are kept in Raw only. A client host that is a
// wildcard (0.0.0.0, ::) or missing is replaced by the member's first
// quorum host, where clients can reach it.
func ParseConfig(data []byte) (EnsembleConfig, error) {
	cfg := EnsembleConfig{Raw: append([]byte(nil), data...)}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch {
		case key == "version":
			v, err := strconv.ParseInt(val, 16, 64)
			if err != nil {
				return EnsembleConfig{}, fmt.Errorf("zookeeper: config: version %q: %w", val, err)
			}
			cfg.Version = v
		case strings.HasPrefix(key, "server."):
			m, err := parseMember(key, val)
			if err != nil {
				return EnsembleConfig{}, fmt.Errorf("zookeeper: config: %q: %w", line, err)
			}
			cfg.Members = append(cfg.Members, m)
		}
	}
	return cfg, nil
}

func parseMember(key, val string) (Member, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(key, "server."), 10, 64)
	if err != nil {
		return Member{}, fmt.Errorf("server id: %w", err)
	}
	m := Member{ID: id, Role: "participant"}
	quorum, client, hasClient := strings.Cut(val, ";")
	// The role ends the quorum part: host:port:port:role.
	if i := strings.LastIndexByte(quorum, ':'); i >= 0 {
		switch r := quorum[i+1:]; r {
		case "participant", "observer":
			m.Role, quorum = r, quorum[:i]
		}
	}
	m.Quorum = quorum
	first, _, _ := strings.Cut(quorum, "|")
	qhost, _, err := net.SplitHostPort(first[:max(strings.LastIndexByte(first, ':'), 0)])
	if err != nil {
		return Member{}, fmt.Errorf("quorum address %q: %w", first, err)
	}
	if hasClient {
		host, port := "", strings.TrimSpace(client)
		if strings.ContainsRune(port, ':') {
			if host, port, err = net.SplitHostPort(port); err != nil {
				return Member{}, fmt.Errorf("client address %q: %w", client, err)
			}
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return Member{}, fmt.Errorf("client port %q: %w", port, err)
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = qhost
		}
		m.Client = net.JoinHostPort(host, port)
	}
	return m, nil
}

// decodeConfig reads a GetDataResponse (the reply to getData and reconfig)
// into v.
func decodeConfig(d *jute.Decoder, v *EnsembleConfig) error {
	data := d.Buffer()
	st := statOf(d)
	if d.Err() != nil {
		return nil // reported by the caller as a marshalling error
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMarshalling, err)
	}
	cfg.Stat = st
	*v = cfg
	return nil
}

// startConfig sends r (a getData of ConfigPath, or a reconfig) and
// decodes its reply into an EnsembleConfig.
func startConfig(c *Client, name string, r *jute.Request) *Call[EnsembleConfig] {
	call := &Call[EnsembleConfig]{op: name, cl: c.newCall(r.Op, ConfigPath)}
	call.cl.decode = func(d *jute.Decoder) error { return decodeConfig(d, &call.v) }
	c.send(r, call.cl)
	return call
}

// Config reads the ensemble's configuration (ZooKeeper 3.5+'s getConfig:
// a read of ConfigPath, outside any chroot). The server answers from its
// own view: after Sync(ctx, ConfigPath) it is at least as new as any
// reconfig committed before. A standalone server without dynamic
// reconfiguration holds an empty configuration (no members, version 0).
func (c *Client) Config(ctx context.Context) (EnsembleConfig, error) {
	if err := ctx.Err(); err != nil {
		return EnsembleConfig{}, err
	}
	return startConfig(c, "getConfig", &jute.Request{Op: jute.OpGetData, Path: ConfigPath}).Wait(ctx)
}

// ConfigW is Config that also sets a one-shot watch, which fires when the
// configuration changes (a reconfig commits).
func (c *Client) ConfigW(ctx context.Context) (EnsembleConfig, *Watch, error) {
	if err := ctx.Err(); err != nil {
		return EnsembleConfig{}, nil, err
	}
	call, w := startWatch(c, "getConfig", ConfigPath, &jute.Request{Op: jute.OpGetData, Path: ConfigPath},
		func(d *jute.Decoder, v *EnsembleConfig) {
			if err := decodeConfig(d, v); err != nil {
				d.Fail(err)
			}
		}, kindData, false)
	return waitWatch(ctx, c, call, w)
}

// Reconfig changes the ensemble's membership incrementally (ZooKeeper
// 3.5+'s reconfig): it adds or updates the servers of add, each a server
// line "server.N=host:peerPort:electionPort[:role];[clientHost:]clientPort",
// and removes the servers whose ids are in remove. With fromVersion >= 0
// it applies only if the configuration's version is still fromVersion
// (ErrBadVersion otherwise); -1 applies it to whatever is current. It
// returns the new configuration once committed.
//
// The server must allow reconfiguration (reconfigEnabled=true, else
// ErrReconfigDisabled, which the embedded zkserver always answers; a
// standalone server with it answers ErrUnimplemented) and the session must be allowed to write
// ConfigPath (the super user, or an ACL granting it; else ErrNoAuth). A
// new server must be running and synced with the leader first (else
// ErrNewConfigNoQuorum); one reconfig at a time (ErrReconfigInProgress).
//
// Removing the leader, or the server the client is connected to, may end
// the connection before the answer comes: ErrConnectionLoss then leaves
// unknown whether the change applied. Once reconnected, Sync and Config
// tell: a version other than fromVersion means it did (which is why a
// reconfig should name the version it changes); Reconfigured does that.
func (c *Client) Reconfig(ctx context.Context, add []string, remove []int64, fromVersion int64) (EnsembleConfig, error) {
	if err := ctx.Err(); err != nil {
		return EnsembleConfig{}, err
	}
	if len(add) == 0 && len(remove) == 0 {
		return EnsembleConfig{}, &OpError{Op: "reconfig", Path: ConfigPath, Err: fmt.Errorf("%w: nothing to add or remove", ErrBadArguments)}
	}
	if err := checkSpecs(add); err != nil {
		return EnsembleConfig{}, &OpError{Op: "reconfig", Path: ConfigPath, Err: err}
	}
	ids := make([]string, len(remove))
	for i, id := range remove {
		ids[i] = strconv.FormatInt(id, 10)
	}
	return startConfig(c, "reconfig", &jute.Request{Op: jute.OpReconfig,
		Joining: strings.Join(add, ","), Leaving: strings.Join(ids, ","), ConfigID: fromVersion}).Wait(ctx)
}

// ReconfigMembers replaces the ensemble's membership by members, server
// lines as Reconfig takes them (a bulk, non-incremental reconfig). The
// rest is as Reconfig.
func (c *Client) ReconfigMembers(ctx context.Context, members []string, fromVersion int64) (EnsembleConfig, error) {
	if err := ctx.Err(); err != nil {
		return EnsembleConfig{}, err
	}
	if len(members) == 0 {
		return EnsembleConfig{}, &OpError{Op: "reconfig", Path: ConfigPath, Err: fmt.Errorf("%w: no members", ErrBadArguments)}
	}
	if err := checkSpecs(members); err != nil {
		return EnsembleConfig{}, &OpError{Op: "reconfig", Path: ConfigPath, Err: err}
	}
	return startConfig(c, "reconfig", &jute.Request{Op: jute.OpReconfig,
		Members: strings.Join(members, ","), ConfigID: fromVersion}).Wait(ctx)
}

// Reconfigured tells whether a reconfig from version fromVersion applied
// when its answer was lost: Reconfig or ReconfigMembers failed with
// ErrConnectionLoss, as it may when the change removes the leader or the
// member the client is connected to. It waits for the session to be
// connected again, syncs ConfigPath and reads the configuration; applied
// is whether its version is no longer fromVersion. A reconfig made by
// someone else meanwhile also moves the version: applied then means that
// the configuration is no longer the one the change was meant for, and cfg
// says what it is. A connection lost during the check is waited out;
// other errors, and ctx's end, are returned.
func (c *Client) Reconfigured(ctx context.Context, fromVersion int64) (cfg EnsembleConfig, applied bool, err error) {
	for {
		if err := c.WaitConnected(ctx); err != nil {
			return EnsembleConfig{}, false, err
		}
		err := c.Sync(ctx, ConfigPath)
		if err == nil {
			cfg, err = c.Config(ctx)
		}
		switch {
		case err == nil:
			return cfg, cfg.Version != fromVersion, nil
		case !errors.Is(err, ErrConnectionLoss) || ctx.Err() != nil:
			return EnsembleConfig{}, false, err
		}
	}
}

// checkSpecs checks that each server line parses, so that a typo fails
// here with its reason rather than as the server's bare ErrBadArguments.
func checkSpecs(specs []string) error {
	for _, s := range specs {
		key, val, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(key, "server.") || strings.ContainsAny(s, ",\n") {
			return fmt.Errorf("%w: server line %q is not server.N=host:port:port[:role];[host:]port", ErrBadArguments, s)
		}
		m, err := parseMember(key, val)
		if err != nil {
			return fmt.Errorf("%w: server line %q: %v", ErrBadArguments, s, err)
		}
		if m.Client == "" {
			return fmt.Errorf("%w: server line %q has no client port (;[host:]port)", ErrBadArguments, s)
		}
	}
	return nil
}
