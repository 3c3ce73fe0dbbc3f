package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// zkrIn runs zkr with stdin as its standard input.
func zkrIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(zkrBin, args...)
	cmd.Env = append(os.Environ(), "ZKR_SERVERS="+shared.Addr(0))
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestDataCommands(t *testing.T) {
	servers(t)
	base := testPath(t, "data")

	r := zkr(t, "create", base+"/cfg", "v1")
	if r.code != exitFailure || !strings.Contains(r.stderr, "parent does not exist (use -p") {
		t.Errorf("create under a missing parent: exit %d, stderr %q", r.code, r.stderr)
	}
	oneLineError(t, r)
	if r := zkr(t, "create", "-p", base+"/cfg", "v1"); r.code != 0 || r.stdout != base+"/cfg\n" {
		t.Fatalf("create -p: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := zkr(t, "create", base+"/cfg"); r.code != exitFailure || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("create of an existing node: exit %d, %q", r.code, r.stderr)
	}
	if r := zkr(t, "get", base+"/cfg"); r.code != 0 || r.stdout != "v1" {
		t.Errorf("get: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := zkr(t, "set", base+"/cfg", "v2", "--version", "0"); r.code != 0 {
		t.Errorf("set at version 0: exit %d, %q", r.code, r.stderr)
	}
	r = zkr(t, "set", base+"/cfg", "v3", "--version", "0")
	if r.code != exitFailure || !strings.Contains(r.stderr, "bad version") {
		t.Errorf("set at a stale version: exit %d, %q", r.code, r.stderr)
	}
	oneLineError(t, r)
	r = zkr(t, "get", base+"/cfg", "--json")
	var v struct {
		Path string
		Data *string
		Stat struct {
			DataVersion int32 `json:"dataVersion"`
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Data == nil || *v.Data != "v2" || v.Stat.DataVersion != 1 {
		t.Errorf("get --json: %q (%v)", r.stdout, err)
	}
	if r := zkr(t, "stat", base+"/cfg"); r.code != 0 || !strings.Contains(r.stdout, "dataVersion = 1\n") || !strings.Contains(r.stdout, "numChildren = 0\n") {
		t.Errorf("stat: exit %d, %q", r.code, r.stdout)
	}
	if r := zkr(t, "create", base+"/null"); r.code != 0 {
		t.Errorf("create without a value: exit %d %q", r.code, r.stderr)
	}
	if r := zkr(t, "get", base+"/null", "--json"); !strings.Contains(r.stdout, `"null":true`) {
		t.Errorf("get --json of a node with no data: %q", r.stdout)
	}
	r = zkr(t, "create", "--sequential", base+"/job-", "x")
	if r.code != 0 || !strings.HasPrefix(r.stdout, base+"/job-00000000") {
		t.Errorf("create --sequential: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	job := strings.TrimSpace(r.stdout)
	if r := zkr(t, "create", "-p", base+"/deep/a/b", "x"); r.code != 0 {
		t.Errorf("create -p deep: %q", r.stderr)
	}
	if r := zkr(t, "ls", base); r.code != 0 || r.stdout != "cfg\ndeep\n"+job[len(base)+1:]+"\nnull\n" {
		t.Errorf("ls: exit %d, %q", r.code, r.stdout)
	}
	want := strings.Join([]string{base + "/deep", base + "/deep/a", base + "/deep/a/b"}, "\n") + "\n"
	if r := zkr(t, "ls", "-R", base+"/deep"); r.stdout != want {
		t.Errorf("ls -R: %q, want %q", r.stdout, want)
	}
	if r := zkr(t, "ls", "--json", base+"/deep/a/b"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ls --json of a leaf: %q", r.stdout)
	}
	r = zkr(t, "rm", base+"/deep")
	if r.code != exitFailure || !strings.Contains(r.stderr, "use -r") {
		t.Errorf("rm of a parent: exit %d, %q", r.code, r.stderr)
	}
	if r := zkr(t, "rm", "-r", base+"/deep"); r.code != 0 {
		t.Errorf("rm -r: exit %d, %q", r.code, r.stderr)
	}
	r = zkr(t, "get", base+"/deep")
	if r.code != exitFailure || !strings.Contains(r.stderr, "node does not exist") {
		t.Errorf("get of a deleted node: exit %d, %q", r.code, r.stderr)
	}
	oneLineError(t, r)
	bin := "\x00\xffbinary\n"
	if r := zkrIn(t, bin, "set", base+"/cfg", "-"); r.code != 0 {
		t.Errorf("set from standard input: exit %d, %q", r.code, r.stderr)
	}
	if r := zkr(t, "get", base+"/cfg"); r.stdout != bin {
		t.Errorf("get after set -: %q, want %q", r.stdout, bin)
	}
	if r := zkr(t, "get", "--json", base+"/cfg"); !strings.Contains(r.stdout, `"data_base64":"AP9iaW5hcnkK"`) {
		t.Errorf("get --json of binary data: %q", r.stdout)
	}
	if r := zkrIn(t, "v2", "set", base+"/cfg", "-"); r.code != 0 {
		t.Errorf("set from standard input: exit %d, %q", r.code, r.stderr)
	}
	t.Logf("a missing node: %s", r.stderr)

	// Bad input: exit 2, nothing sent.
	for _, args := range [][]string{
		{"get", "nope"},
		{"set", base + "/cfg"},
		{"set", base + "/cfg", "a", "b"},
		{"create", "--container", "--sequential", base + "/x"},
		{"rm", "-r", "--version", "3", base + "/cfg"},
		{"ls"},
	} {
		r := zkr(t, args...)
		if r.code != exitUsage {
			t.Errorf("zkr %q: exit %d, want %d; stderr %q", args, r.code, exitUsage, r.stderr)
		}
		oneLineError(t, r)
	}
	if r := zkr(t, "get", base+"/cfg"); r.stdout != "v2" {
		t.Errorf("bad input changed the node: %q", r.stdout)
	}
}
