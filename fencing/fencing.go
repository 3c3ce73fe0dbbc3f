package fencing

import (
	"context"
	"errors"
	"fmt"
)

// ErrStale is what a [*StaleError] matches with [errors.Is]: a write was
// refused because its token is lower than one the resource already
// accepted.
var ErrStale = errors.New("fencing: stale token")

// ErrNoToken means a write came without a token, or with one that is not
// positive (0 is what a lock's Token returns when it is not held).
var ErrNoToken = errors.New("fencing: no fencing token")

// StaleError is a write refused because a newer holder has written: the
// write's Token is lower than Highest, the highest token the resource has
// accepted. The write changed nothing. The holder that sent it has lost its
// lock, whether or not it was told yet; it should stop acting as the
// holder, not retry.
type StaleError struct {
	Resource string // the fenced resource's name
	Token    int64  // the refused write's token
	Highest  int64  // the highest token accepted for Resource
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("fencing: write to %q refused: its token %d is lower than %d, a newer holder's", e.Resource, e.Token, e.Highest)
}

// Is reports whether target is ErrStale.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// checkToken returns an error wrapping ErrNoToken if token is not positive.
func checkToken(resource string, token int64) error {
	if token <= 0 {
		return fmt.Errorf("%w for %q: token %d (a lock's Token is 0 when it is not held)", ErrNoToken, resource, token)
	}
	return nil
}

// A TokenSource gives the fencing token of a current holding, 0 when there
// is none. *zkrecipes.Mutex, *zkrecipes.RWMutex and
// *zkrecipes.Election are TokenSources.
type TokenSource interface {
	Token() int64
}

// TokenFunc is a function used as a [TokenSource], for instance
//
//	fencing.TokenFunc(func() int64 { return multi.Token(path) })
type TokenFunc func() int64

// Token returns f().
func (f TokenFunc) Token() int64 { return f() }

type tokenKey struct{}

// WithToken returns a context carrying token: a [Transport] sends it in
// preference to its Source, and in a handler behind a [Guard] the
// request's context carries the token the Guard accepted.
func WithToken(ctx context.Context, token int64) context.Context {
	return context.WithValue(ctx, tokenKey{}, token)
}

// TokenFrom returns the token ctx carries (see [WithToken]) and whether it
// carries one.
func TokenFrom(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(tokenKey{}).(int64)
	return t, ok
}
