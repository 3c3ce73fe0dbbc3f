package zktest

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

func TestAvailableReportsMissing(t *testing.T) {
	t.Setenv(ServerEnv, "zookeeper") // require it: no embedded stand-in
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

// TestFallbackToEmbedded: with ZKTEST_SERVER unset and no ZooKeeper
// installed, Start hands out the embedded server outside CI and reports
// what needs real ZooKeeper as unavailable (a skip); in CI, or with
// ZKTEST_SERVER=zookeeper, ZooKeeper is required as before.
func TestFallbackToEmbedded(t *testing.T) {
	t.Setenv(ServerEnv, "")
	t.Setenv("CI", "")
	t.Setenv("ZOOKEEPER_HOME", t.TempDir()) // no jars: ZooKeeper is missing
	if err := Available(); err != nil {
		t.Fatalf("Available without ZooKeeper outside CI = %v, want nil (the embedded server)", err)
	}
	c := StartT(t, Options{})
	if !c.Embedded() {
		t.Fatal("Start without ZooKeeper outside CI did not run the embedded server")
	}
	conn := connectZK(t, c.Addr(0))
	if _, err := conn.Create(t.Context(), "/fallback", nil, zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll)); err != nil {
		t.Fatalf("create on the embedded server: %v", err)
	}
	for _, opts := range []Options{{Servers: 3}, {TLS: true}, {RealZooKeeper: true}} {
		c, err := Start(t.Context(), opts)
		if err == nil {
			c.Close()
			t.Fatalf("Start(%+v) without ZooKeeper succeeded", opts)
		}
		if !isUnavailable(err) || !strings.Contains(err.Error(), "real ZooKeeper is needed") {
			t.Errorf("Start(%+v) without ZooKeeper = %v, want an unavailable error saying it needs real ZooKeeper", opts, err)
		}
	}
	for _, env := range [][2]string{{"CI", "true"}, {ServerEnv, "zookeeper"}} {
		t.Run(env[0], func(t *testing.T) {
			t.Setenv(env[0], env[1])
			if err := Available(); !isUnavailable(err) {
				t.Errorf("Available with %s=%s and no ZooKeeper = %v, want unavailable", env[0], env[1], err)
			}
			if emb, err := useEmbedded(Options{}); emb || err != nil {
				t.Errorf("useEmbedded with %s=%s = %v, %v: want real ZooKeeper", env[0], env[1], emb, err)
			}
		})
	}
}
