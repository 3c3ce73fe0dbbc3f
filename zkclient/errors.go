package zkclient

import (
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// Code is an error code of the ZooKeeper protocol. The codes a server
// answers are returned wrapped (with the operation and path), so compare
// them with errors.Is: errors.Is(err, zkclient.ErrNoNode).
type Code int32

// The error codes of ZooKeeper 3.8 a client meets.
const (
	ErrSystem                  Code = Code(jute.ErrSystem)
	ErrRuntimeInconsistency    Code = Code(jute.ErrRuntimeInconsistency)
	ErrConnectionLoss          Code = Code(jute.ErrConnectionLoss)
	ErrMarshalling             Code = Code(jute.ErrMarshalling)
	ErrUnimplemented           Code = Code(jute.ErrUnimplemented)
	ErrBadArguments            Code = Code(jute.ErrBadArguments)
	ErrNoNode                  Code = Code(jute.ErrNoNode)
	ErrNoAuth                  Code = Code(jute.ErrNoAuth)
	ErrBadVersion              Code = Code(jute.ErrBadVersion)
	ErrNoChildrenForEphemerals Code = Code(jute.ErrNoChildrenForEphemerals)
	ErrNodeExists              Code = Code(jute.ErrNodeExists)
	ErrNotEmpty                Code = Code(jute.ErrNotEmpty)
	ErrSessionExpired          Code = Code(jute.ErrSessionExpired)
	ErrInvalidACL              Code = Code(jute.ErrInvalidACL)
	ErrAuthFailed              Code = Code(jute.ErrAuthFailed)
	ErrNoWatcher               Code = Code(jute.ErrNoWatcher)
	ErrReconfigDisabled        Code = Code(jute.ErrReconfigDisabled)
	ErrNewConfigNoQuorum       Code = -13 // reconfig: a quorum of the new configuration is not connected and synced
	ErrReconfigInProgress      Code = -14 // reconfig: another reconfig is under way
	ErrSessionMoved            Code = -118
	ErrSASLRequired            Code = -124 // the server requires SASL (sessionRequireClientSASLAuth) and closed the connection
	ErrNotReadOnly             Code = -119
	ErrQuotaExceeded           Code = -125
	ErrThrottled               Code = -127
)

var codeNames = map[Code]string{
	ErrSystem:                  "system error",
	ErrRuntimeInconsistency:    "runtime inconsistency",
	ErrConnectionLoss:          "connection lost",
	ErrMarshalling:             "marshalling error",
	ErrUnimplemented:           "unimplemented",
	ErrBadArguments:            "bad arguments",
	ErrNoNode:                  "node does not exist",
	ErrNoAuth:                  "not authenticated",
	ErrBadVersion:              "bad version",
	ErrNoChildrenForEphemerals: "ephemeral nodes may not have children",
	ErrNodeExists:              "node already exists",
	ErrNotEmpty:                "node has children",
	ErrSessionExpired:          "session expired",
	ErrInvalidACL:              "invalid ACL",
	ErrAuthFailed:              "authentication failed",
	ErrNoWatcher:               "no such watcher",
	ErrReconfigDisabled:        "reconfiguration disabled",
	ErrSessionMoved:            "session moved to another server",
	ErrSASLRequired:            "session closed: SASL authentication required",
	ErrNotReadOnly:             "server is read-only",
	ErrQuotaExceeded:           "quota exceeded",
	ErrThrottled:               "request throttled",
	-3:                         "data inconsistency",
	-7:                         "operation timeout",
	-12:                        "unknown session",
	ErrNewConfigNoQuorum:       "new configuration has no quorum",
	ErrReconfigInProgress:      "reconfiguration in progress",
	-120:                       "ephemeral node on a local session",
	-122:                       "request timeout",
}

func (c Code) Error() string {
	if s, ok := codeNames[c]; ok {
		return "zookeeper: " + s
	}
	return fmt.Sprintf("zookeeper: error code %d", int32(c))
}

// outcomeNames are the values CodeName gives the codes a recipe meets:
// the names of the Java client's KeeperException.Code.
var outcomeNames = map[Code]string{
	ErrNoNode:         "NONODE",
	ErrNodeExists:     "NODEEXISTS",
	ErrBadVersion:     "BADVERSION",
	ErrNotEmpty:       "NOTEMPTY",
	ErrNoAuth:         "NOAUTH",
	ErrConnectionLoss: "CONNECTIONLOSS",
	ErrSessionExpired: "SESSIONEXPIRED",
	ErrSessionMoved:   "SESSIONMOVED",
	ErrNoWatcher:      "NOWATCHER",
	ErrThrottled:      "THROTTLEDOP",
}

// CodeName names the outcome of a request (RequestEvent.Err) from a small
// fixed set, for a metric label or attribute that must stay bounded: "OK"
// for nil; for a Code that errors.As finds in err, the name the Java
// client's KeeperException.Code gives it, if it is one a recipe meets
// (NONODE, NODEEXISTS, BADVERSION, NOTEMPTY, NOAUTH, CONNECTIONLOSS,
// SESSIONEXPIRED, SESSIONMOVED, NOWATCHER, THROTTLEDOP); "CLOSED" for
// ErrClosed; "OTHER" for anything else.
func CodeName(err error) string {
	if err == nil {
		return "OK" // before c, which escapes: no allocation for a success
	}
	var c Code
	switch {
	case errors.As(err, &c):
		if s, ok := outcomeNames[c]; ok {
			return s
		}
	case errors.Is(err, ErrClosed):
		return "CLOSED"
	}
	return "OTHER"
}

// Errors of the client itself.
var (
	// ErrClosed is returned by every call on a Client after Close.
	ErrClosed = errors.New("zookeeper: session closed")

	// ErrInvalidPath is returned, before any request is sent, for a path
	// ZooKeeper would refuse.
	ErrInvalidPath = errors.New("zookeeper: invalid path")

	// ErrTooLarge is returned, before anything is sent, for a request
	// whose frame would exceed the server's limit (jute.maxbuffer).
	ErrTooLarge = errors.New("zookeeper: request exceeds the frame limit")

	// ErrCloseUnconfirmed is returned by Close when the server did not
	// confirm the end of the session in time: its ephemeral nodes stay
	// until the server expires the session.
	ErrCloseUnconfirmed = errors.New("zookeeper: close not confirmed by the server; the session ends when it expires")

	// ErrNoServer is returned by Connect when no server could be reached.
	ErrNoServer = errors.New("zookeeper: no server reachable")
)

// OpError is the error of one request: the operation, its path and the
// cause, which is a Code or one of the client's errors.
type OpError struct {
	Op   string
	Path string
	Err  error
}

func (e *OpError) Error() string {
	if e.Path == "" {
		return e.Op + ": " + e.Err.Error()
	}
	return e.Op + " " + e.Path + ": " + e.Err.Error()
}

func (e *OpError) Unwrap() error { return e.Err }
