package zktest

import (
	"errors"
	"testing"
	"time"
)

func TestBoundScales(t *testing.T) {
	if got, want := Bound(time.Second), time.Duration(float64(time.Second)*Scale()); got != want {
		t.Fatalf("Bound(1s) = %v, want %v", got, want)
	}
	if raceEnabled && Scale() < 2 {
		t.Fatalf("Scale() = %v under the race detector, want at least 2", Scale())
	}
}

func TestPollReturnsLastError(t *testing.T) {
	n := 0
	err := Poll(30*time.Millisecond, func() error {
		n++
		return errors.New("not yet")
	})
	if err == nil || err.Error() != "not yet" {
		t.Fatalf("Poll = %v, want the last error", err)
	}
	if n < 2 {
		t.Fatalf("Poll called f %d times, want it to retry", n)
	}
	n = 0
	if err := Poll(time.Minute, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || n != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, n)
	}
}
