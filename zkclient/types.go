package zkclient

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// Stat is a node's metadata, as the server keeps it.
type Stat struct {
	Czxid          int64 // zxid of the change that created the node
	Mzxid          int64 // zxid of the last change of its data
	Ctime          int64 // creation time, milliseconds since the epoch
	Mtime          int64 // time of the last data change, milliseconds
	Version        int32 // number of changes to its data
	Cversion       int32 // number of changes to its children
	Aversion       int32 // number of changes to its ACL
	EphemeralOwner int64 // the owning session of an ephemeral node, else 0
	DataLength     int32 // length of its data
	NumChildren    int32 // number of children
	Pzxid          int64 // zxid of the last change of its children
}

func statOf(d *jute.Decoder) Stat {
	var s jute.Stat
	s.Decode(d)
	return Stat(s)
}

// CreateMode is the kind of node Create makes.
type CreateMode int32

// Create modes, as ZooKeeper numbers them.
const (
	Persistent                  CreateMode = 0
	Ephemeral                   CreateMode = 1
	PersistentSequential        CreateMode = 2
	EphemeralSequential         CreateMode = 3
	Container                   CreateMode = 4 // removed by the server once its last child is gone
	PersistentWithTTL           CreateMode = 5 // removed once unchanged and childless for its TTL
	PersistentSequentialWithTTL CreateMode = 6
)

// Sequential reports whether the server appends a sequence number.
func (m CreateMode) Sequential() bool {
	return m == PersistentSequential || m == EphemeralSequential || m == PersistentSequentialWithTTL
}

// Ephemeral reports whether the node ends with the session.
func (m CreateMode) Ephemeral() bool { return m == Ephemeral || m == EphemeralSequential }

func (m CreateMode) ttl() bool { return m == PersistentWithTTL || m == PersistentSequentialWithTTL }

// Permission bits of an ACL.
const (
	PermRead   int32 = 1
	PermWrite  int32 = 2
	PermCreate int32 = 4
	PermDelete int32 = 8
	PermAdmin  int32 = 16
	PermAll    int32 = 31
)

// ACL grants the permissions Perms to the identity ID of Scheme
// ("world"/"anyone", "digest"/"user:base64(sha1(user:password))", "auth"/"",
// "ip"/"addr[/bits]", "x509"/subject).
type ACL struct {
	Perms  int32
	Scheme string
	ID     string
}

// WorldACL grants perms to everyone.
func WorldACL(perms int32) []ACL { return []ACL{{Perms: perms, Scheme: "world", ID: "anyone"}} }

// AuthACL grants perms to every identity the creating session has
// authenticated as (with AddAuth, a client certificate, SASL).
func AuthACL(perms int32) []ACL { return []ACL{{Perms: perms, Scheme: "auth", ID: ""}} }

func encodeACL(acl []ACL) []jute.ACL {
	out := make([]jute.ACL, len(acl))
	for i, a := range acl {
		out[i] = jute.ACL{Perms: a.Perms, ID: jute.ID{Scheme: a.Scheme, ID: a.ID}}
	}
	return out
}

func decodeACL(in []jute.ACL) []ACL {
	out := make([]ACL, len(in))
	for i, a := range in {
		out[i] = ACL{Perms: a.Perms, Scheme: a.ID.Scheme, ID: a.ID.ID}
	}
	return out
}

// EventType is the kind of a watch event.
type EventType int32

// Watch event types. EventNotWatching is the client's own: the watch ended
// without a change being seen (the session ended, or the watch was
// removed); Event.Err says why.
const (
	EventNodeCreated         EventType = EventType(jute.EventNodeCreated)
	EventNodeDeleted         EventType = EventType(jute.EventNodeDeleted)
	EventNodeDataChanged     EventType = EventType(jute.EventNodeDataChanged)
	EventNodeChildrenChanged EventType = EventType(jute.EventNodeChildrenChanged)
	EventNotWatching         EventType = -2
)

func (t EventType) String() string {
	switch t {
	case EventNodeCreated:
		return "NodeCreated"
	case EventNodeDeleted:
		return "NodeDeleted"
	case EventNodeDataChanged:
		return "NodeDataChanged"
	case EventNodeChildrenChanged:
		return "NodeChildrenChanged"
	case EventNotWatching:
		return "NotWatching"
	}
	return fmt.Sprintf("EventType(%d)", int32(t))
}

// Event is a watch event: a change of the node at Path (relative to the
// chroot). An event of type EventNotWatching carries in Err why the watch
// ended.
type Event struct {
	Type EventType
	Path string
	Err  error
}

// State is the life of a session as the client sees it.
type State int32

// Session states. Connected, Suspended and Reconnected may repeat; Expired,
// AuthFailed and Closed are final.
const (
	StateConnecting  State = iota // before the first session is established
	StateConnected                // the session was established
	StateSuspended                // the connection is down; the session may live on the server
	StateReconnected              // connected again, on the same session
	StateExpired                  // the server ended the session
	StateAuthFailed               // the server refused the credentials; the session is over
	StateClosed                   // closed by Close
)

func (s State) String() string {
	switch s {
	case StateConnecting:
		return "connecting"
	case StateConnected:
		return "connected"
	case StateSuspended:
		return "suspended"
	case StateReconnected:
		return "reconnected"
	case StateExpired:
		return "expired"
	case StateAuthFailed:
		return "auth-failed"
	case StateClosed:
		return "closed"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Final reports whether no state follows s.
func (s State) Final() bool { return s >= StateExpired }

// Live reports whether s has a connection to a server on the session.
func (s State) Live() bool { return s == StateConnected || s == StateReconnected }

// ClientInfo is one identity of the session, as WhoAmI reports it.
type ClientInfo struct {
	Scheme string
	User   string
}

// DigestACL grants perms to the digest identity user with password, as
// ZooKeeper stores it: user:base64(sha1(user:password)).
func DigestACL(perms int32, user, password string) []ACL {
	sum := sha1.Sum([]byte(user + ":" + password))
	return []ACL{{Perms: perms, Scheme: "digest", ID: user + ":" + base64.StdEncoding.EncodeToString(sum[:])}}
}
