package zkrecipes

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// TestErrorPrefixOnce: an error that wraps the recipes' own errors, however
// deep, prints "zkrecipes: " once, and still matches every sentinel it wraps.
func TestErrorPrefixOnce(t *testing.T) {
	inner := errorf("create in %s: %w", "/x", ErrNodeLost)
	err := errorf("lock %s: %w", "/x", inner)
	want := "zkrecipes: lock /x: create in /x: " + ErrNodeLost.Error()[len(prefix):]
	if err.Error() != want {
		t.Errorf("error text %q, want %q", err.Error(), want)
	}
	if !errors.Is(err, ErrNodeLost) {
		t.Errorf("errors.Is(%v, ErrNodeLost) = false", err)
	}
	// Errors from other packages keep their own text.
	err = errorf("lock %s: %w", "/x", zkclient.ErrClosed)
	if want := "zkrecipes: lock /x: " + zkclient.ErrClosed.Error(); err.Error() != want {
		t.Errorf("error text %q, want %q", err.Error(), want)
	}
	if !errors.Is(err, zkclient.ErrClosed) {
		t.Errorf("errors.Is(%v, ErrClosed) = false", err)
	}
}
