package zktest

import "github.com/zkrecipes/zkrecipes/internal/faultproxy"

// Proxy is a TCP proxy for putting faults between one ZooKeeper client and
// one server. It accepts connections on a loopback address and connects
// each to the current target. Forwarding is switched for all connections
// at once, current and new, by Pass, Delay, Pause, PauseReplies and
// Blackhole. Cut and CutOnRequest break connections, and Refuse turns new
// ones away; Tripped signals a fired trap, Conns counts the connections,
// SetTarget redirects new ones, and Close stops it all.
//
// In the client-to-server direction the proxy reads whole ZooKeeper frames
// (a 4-byte big-endian length and the record) and forwards each in one
// write; the other direction is forwarded in chunks as read. A stream
// that is not framed like ZooKeeper, such as a four-letter word, is
// forwarded in chunks too. A Proxy is safe for concurrent use.
type Proxy = faultproxy.Proxy

// NewProxy starts a proxy listening on 127.0.0.1 on a free port that
// forwards to target, in pass mode.
func NewProxy(target string) (*Proxy, error) { return faultproxy.New(target) }
