package zkclient

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// movePlan is where the client goes next after SetServers decided it
// must move: to one of newS (servers not in the previous list) with
// probability probNew, else one of oldS, each tried once, in random order;
// once both are spent, round robin over the whole list again.
type movePlan struct {
	newS, oldS []string
	probNew    float64
	iNew, iOld int
}

// Servers returns the client's current server list ("host:port"), in
// the order it tries them. The slice is a copy.
func (c *Client) Servers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.servers)
}

// SetServers replaces the client's server list (each element as Connect
// takes them, without a chroot) and rebalances the session over it as
// ZooKeeper's own client does (its StaticHostProvider.updateServerList),
// so that the sessions of many clients spread evenly over the new list
// while as few as possible move:
//
//   - if the current server is in the new list and the list grew from n
//     to m servers, the client moves with probability 1 - n/m, to one of
//     the servers that are new; otherwise it stays;
//   - if the current server is not in the new list, the client moves: to
//     a new server, or to one of the old ones with the probability that
//     keeps the old servers' load even.
//
// A move drops the current connection (requests in flight fail with
// ErrConnectionLoss, StateSuspended then StateReconnected follow) and
// resumes the session on the chosen server; the session, its ephemeral
// nodes and watches survive. Host names are resolved at each connection
// attempt, so a name that moved to a new address is found on the next
// reconnection. WithFollowConfig calls SetServers whenever the
// ensemble's configuration changes.
func (c *Client) SetServers(servers []string) error {
	addrs, chroot, err := ParseServers(strings.Join(servers, ","))
	if err != nil {
		return err
	}
	if chroot != "" && chroot != c.chroot && !(chroot == "/" && c.chroot == "") {
		return fmt.Errorf("zookeeper: SetServers: the server list has chroot %q; the client's (%q) cannot change", chroot, c.chroot)
	}
	addrs = slices.Compact(slices.Sorted(slices.Values(addrs)))
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })

	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	cur := c.server
	move, newS, oldS, probNew := rebalance(c.servers, addrs, cur, rand.Float64())
	c.servers = addrs
	c.next = 0
	if i := slices.Index(addrs, cur); i >= 0 && !move {
		c.next = i + 1
	}
	c.move = nil
	if move {
		c.move = &movePlan{newS: newS, oldS: oldS, probNew: probNew}
	}
	cn := c.cn
	c.mu.Unlock()
	if move && cn != nil {
		c.log.Info("zookeeper server list changed; moving the session", "server", cn.addr, "servers", addrs)
		cn.fail(fmt.Errorf("%w: server list changed, moving from %s to rebalance", ErrConnectionLoss, cn.addr))
	}
	return nil
}

// rebalance is ZooKeeper's client rebalancing rule: given the previous
// list, the new one, the current server and a uniform draw in [0, 1), it
// says whether the client moves, splits the new list into the servers
// that are new and those that were there before, and gives the
// probability of moving to a new one rather than an old one.
func rebalance(prev, next []string, cur string, draw float64) (move bool, newS, oldS []string, probNew float64) {
	for _, a := range next {
		if slices.Contains(prev, a) {
			oldS = append(oldS, a)
		} else {
			newS = append(newS, a)
		}
	}
	n, m := len(prev), len(next)
	inNew := slices.Contains(next, cur)
	probNew = 1
	switch {
	case m > n && inNew:
		// Some of the current server's clients must go to the new ones.
		move = draw < 1-float64(n)/float64(m)
	case m > n || !inNew && len(oldS) == 0:
		move = true
	case !inNew:
		// The current server is gone: spread its clients so that old
		// and new servers end with the same load.
		move = true
		if d := m * (n - len(oldS)); d > 0 {
			probNew = 1 - float64(len(oldS)*(n-m))/float64(d)
		}
	}
	return move, newS, oldS, probNew
}

// nextServerLocked returns the server to try next: from the move plan
// while there is one, else the next in turn.
func (c *Client) nextServerLocked() string {
	if p := c.move; p != nil {
		takeNew := rand.Float64() < p.probNew
		if p.iNew < len(p.newS) && (takeNew || p.iOld >= len(p.oldS)) {
			p.iNew++
			return p.newS[p.iNew-1]
		}
		if p.iOld < len(p.oldS) {
			p.iOld++
			return p.oldS[p.iOld-1]
		}
		c.move = nil
	}
	addr := c.servers[c.next%len(c.servers)]
	c.next++
	return addr
}

// follow keeps the server list the ensemble's (WithFollowConfig): it
// reads the configuration with a watch and hands each new one to
// SetServers, until the session is over.
func (c *Client) follow() {
	defer c.bg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	last := int64(-1)
	for {
		if err := c.WaitConnected(ctx); err != nil {
			return
		}
		cfg, w, err := c.ConfigW(ctx)
		if err != nil {
			c.log.Debug("zookeeper: reading the ensemble's configuration", "err", err)
			select {
			case <-time.After(time.Duration(100+rand.IntN(200)) * time.Millisecond):
				continue
			case <-ctx.Done():
				return
			}
		}
		if s := cfg.Servers(); len(s) > 0 && cfg.Version != last {
			last = cfg.Version
			if err := c.SetServers(s); err != nil {
				c.log.Warn("zookeeper: following the ensemble's configuration", "err", err)
			}
		}
		select {
		case <-w.Event():
		case <-ctx.Done():
			return
		}
	}
}
