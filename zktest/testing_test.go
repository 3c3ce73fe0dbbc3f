package zktest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestStartTKeepsDirectoriesOfFailedTest: when a test fails, StartT's
// clean-up stops the members but leaves their directories (data,
// zookeeper.log) and says where. The failing test runs in a child process
// of this test binary.
func TestStartTKeepsDirectoriesOfFailedTest(t *testing.T) {
	if os.Getenv("ZKTEST_KEEP_CHILD") == "1" {
		StartT(t, Options{RealZooKeeper: true})
		t.Error("failed on purpose")
		return
	}
	SkipOrFail(t, Available())
	cmd := exec.Command(os.Args[0], "-test.run", "^TestStartTKeepsDirectoriesOfFailedTest$", "-test.v")
	cmd.Env = append(os.Environ(), "ZKTEST_KEEP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child test passed:\n%s", out)
	}
	m := regexp.MustCompile(`are kept in (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("the child's output names no directory:\n%s", out)
	}
	dir := string(m[1])
	defer os.RemoveAll(dir)
	for _, name := range []string{"zk1/zookeeper.log", "zk1/zoo.cfg", "zk1/data/version-2"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("kept: %v", err)
		}
	}
}
