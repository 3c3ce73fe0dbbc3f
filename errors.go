package zkrecipes

import (
	"errors"
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Errors returned by the recipes. Compare with errors.Is: the errors a call
// returns wrap one of these with the detail of what went wrong.
var (
	// ErrSessionExpired means the ZooKeeper server expired the session (or the
	// session was replaced). Every lock, leadership and membership obtained
	// through it is void, and the Session cannot be used again.
	ErrSessionExpired error = zkclient.ErrSessionExpired

	// ErrSessionClosed means the Session was closed by its owner.
	ErrSessionClosed = zkclient.ErrClosed

	// ErrConnectionLoss means the connection to the server was lost while a
	// request was in flight; the session may still be alive. Recipes retry
	// across it where that is safe and only return it when they cannot.
	ErrConnectionLoss error = zkclient.ErrConnectionLoss

	// ErrReleaseUnconfirmed means a release (Unlock, Resign, Leave, a
	// LockingQueue Consume, or the clean-up of a failed acquire) could not
	// be confirmed within the
	// session timeout although the session lives (a lost quorum expires
	// no session): the node may still be there. The Session goes on
	// deleting it in the background until it is gone or the session ends.
	ErrReleaseUnconfirmed = errors.New("zkrecipes: release not confirmed by the server")

	// ErrLocked is returned by TryLock when another contender holds the lock.
	ErrLocked = errors.New("zkrecipes: held by another contender")

	// ErrNotHeld is returned when releasing something this value does not hold.
	ErrNotHeld = errors.New("zkrecipes: not held")

	// ErrBusy is returned when a recipe value is asked to acquire while it
	// already holds or is already acquiring. A value is one contender; use one
	// value per goroutine that competes.
	ErrBusy = errors.New("zkrecipes: already held or being acquired by this value")

	// ErrInvalidPath is returned, before any network call, for a path
	// ZooKeeper would reject or a recipe cannot use. It is the client's
	// zkclient.ErrInvalidPath, so the data plane's errors match it too.
	ErrInvalidPath error = zkclient.ErrInvalidPath

	// ErrNodeLost means this contender's node disappeared while it was
	// queued or holding (deleted by another client, or by the server when the
	// session ended).
	ErrNodeLost = errors.New("zkrecipes: contender node disappeared")

	// ErrNotOwner means a node that should be this session's belongs to
	// another session; it is never treated as ours.
	ErrNotOwner = errors.New("zkrecipes: node is owned by another session")

	// ErrSequenceWrapped means the parent's sequence counter went past 2^31
	// and wrapped to negative numbers, so arrival order can no longer be read
	// from node names. Use a fresh path.
	ErrSequenceWrapped = errors.New("zkrecipes: sequence counter wrapped")

	// ErrInvalidArgument is returned, before any network call, for an
	// argument a recipe cannot use: an empty participant or member id, a
	// member id that is not one path segment, a count below one.
	ErrInvalidArgument = errors.New("zkrecipes: invalid argument")

	// ErrUpgrade is returned by RWMutex.Lock on a value that holds the read
	// lock: the write lock would wait for that read lock, forever.
	ErrUpgrade = errors.New("zkrecipes: cannot upgrade a read lock to a write lock: it would wait for itself")

	// ErrNoLeader is returned by Election.Leader when nobody campaigns.
	ErrNoLeader = errors.New("zkrecipes: no leader")

	// ErrMemberExists is returned by JoinGroup when the member id is taken:
	// a node of that name exists in the group and was not made by this call.
	ErrMemberExists = errors.New("zkrecipes: member id already taken")

	// ErrPermitsMismatch means a Semaphore was used with a number of permits
	// other than the one recorded by the participants already using its path.
	ErrPermitsMismatch = errors.New("zkrecipes: semaphore participants disagree on the number of permits")
)

// prefix starts the text of every error the recipes make.
const prefix = "zkrecipes: "

// errorf is fmt.Errorf for the recipes' errors: its text starts with
// "zkrecipes: " once. The errors it formats or wraps (the sentinels above,
// and the recipes' errors from deeper calls) carry the prefix too, so each
// error among args is printed without it; it is still wrapped, for
// errors.Is and errors.As.
func errorf(format string, args ...any) error {
	for i, a := range args {
		if err, ok := a.(error); ok {
			args[i] = unprefixed{err}
		}
	}
	return fmt.Errorf(prefix+format, args...)
}

// unprefixed is an error printed without a leading prefix.
type unprefixed struct{ err error }

func (u unprefixed) Error() string { return strings.TrimPrefix(u.err.Error(), prefix) }
func (u unprefixed) Unwrap() error { return u.err }
