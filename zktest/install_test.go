package zktest

import (
	"errors"
	"runtime"
	"testing"
)

func TestAvailableReportsMissing(t *testing.T) {
	skipIfEmbedded(t)
	t.Setenv("ZOOKEEPER_HOME", t.TempDir())
	err := Available()
	if err == nil || !isUnavailable(err) {
		t.Fatalf("Available with an empty ZOOKEEPER_HOME = %v", err)
	}
	t.Setenv("ZKTEST_JAVA", "/nonexistent/java")
	if err := Available(); err == nil || !isUnavailable(err) {
		t.Fatalf("Available with a missing java = %v", err)
	}
}

// recordingTB records how a test ended.
type recordingTB struct {
	testing.TB
	ended string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Skipf(string, ...any) {
	r.ended = "skip"
	runtime.Goexit()
}

func (r *recordingTB) Fatalf(string, ...any) {
	r.ended = "fail"
	runtime.Goexit()
}

func TestSkipOrFail(t *testing.T) {
	unavailable := &unavailableError{"no zookeeper"}
	for _, tc := range []struct {
		err  error
		ci   string
		want string
	}{
		{nil, "true", ""},
		{unavailable, "", "skip"},
		{unavailable, "true", "fail"},
		{errors.New("boom"), "", "fail"},
	} {
		t.Setenv("CI", tc.ci)
		r := &recordingTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			SkipOrFail(r, tc.err)
		}()
		<-done
		if r.ended != tc.want {
			t.Errorf("SkipOrFail(%v) with CI=%q: %q, want %q", tc.err, tc.ci, r.ended, tc.want)
		}
	}
}

func TestUnavailableSkipsOutsideCI(t *testing.T) {
	if Unavailable(nil) != nil {
		t.Fatal("Unavailable(nil) is not nil")
	}
	missing := errors.New("no kazoo")
	marked := Unavailable(missing)
	if marked.Error() != missing.Error() || !errors.Is(marked, missing) {
		t.Fatalf("Unavailable(%v) = %v, which does not wrap it", missing, marked)
	}
	for _, tc := range []struct{ ci, want string }{{"", "skip"}, {"1", "fail"}, {"true", "fail"}} {
		t.Setenv("CI", tc.ci)
		r := &recordingTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			SkipOrFail(r, marked)
		}()
		<-done
		if r.ended != tc.want {
			t.Errorf("SkipOrFail(Unavailable(%v)) with CI=%q: %q, want %q", missing, tc.ci, r.ended, tc.want)
		}
	}
}
