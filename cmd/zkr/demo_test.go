package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// demoRow finds the table row that starts with prefix and returns its
// events per release.
func demoRow(t *testing.T, out, prefix string) (clients int, events float64) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		f := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(l), -1)
		if len(f) != 9 {
			t.Fatalf("row %q has %d columns, want 9", l, len(f))
		}
		clients, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("row %q: clients: %v", l, err)
		}
		events, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			t.Fatalf("row %q: events: %v", l, err)
		}
		return clients, events
	}
	t.Fatalf("no row %q in:\n%s", prefix, out)
	return 0, 0
}

func TestDemo(t *testing.T) {
	servers(t)
	r := zkr(t, "demo", "--clients", "50")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	t.Logf("zkr demo --clients 50:\n%s", r.stdout)
	n, ours := demoRow(t, r.stdout, "predecessor watch")
	_, naive := demoRow(t, r.stdout, "naive")
	if n != 50 {
		t.Errorf("clients %d, want 50", n)
	}
	// A waiter whose predecessor left before its watch was set learns it
	// from its listing, without an event: at most one event per release.
	if ours > 1 || ours < 0.9 {
		t.Errorf("predecessor watch: %.2f events per release, want 1", ours)
	}
	if naive < 5 {
		t.Errorf("naive: %.2f events per release, want many more than 1", naive)
	}
	if !strings.Contains(r.stderr, "using ZooKeeper at "+shared.Addr(0)) {
		t.Errorf("demo does not say which server it uses:\n%s", r.stderr)
	}
}

func TestDemoPlotAndJSON(t *testing.T) {
	servers(t)
	dir := t.TempDir()
	pngFile, svgFile := filepath.Join(dir, "herd.png"), filepath.Join(dir, "herd.svg")

	r := zkr(t, "demo", "--sweep", "5,20", "--plot", pngFile, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	var rep herdReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if len(rep.Runs) != 4 {
		t.Fatalf("--json: %d runs, want 4 (2 recipes x 2 sizes)", len(rep.Runs))
	}
	if len(rep.Bystander) != len(rep.Runs) || rep.BystanderAlone.Reads == 0 || rep.BystanderAlone.ReadP99 <= 0 {
		t.Errorf("--json: bystander %+v alone %+v, want one entry per run and reads alone", rep.Bystander, rep.BystanderAlone)
	}
	for _, run := range rep.Runs {
		if run.Acquisitions != run.Contenders || run.PerSecond <= 0 || run.EventsPerRelease <= 0 {
			t.Errorf("implausible run: %+v", run)
		}
	}
	b, err := os.ReadFile(pngFile)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("--plot wrote an invalid PNG: %v", err)
	}
	if sz := img.Bounds().Size(); sz.X < 200 || sz.Y < 100 {
		t.Errorf("PNG is only %v", sz)
	}

	r = zkr(t, "demo", "--sweep", "5", "--plot", svgFile)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	b, err = os.ReadFile(svgFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("<svg")) || !bytes.HasSuffix(bytes.TrimSpace(b), []byte("</svg>")) {
		t.Errorf("--plot wrote no SVG document:\n%.200s", b)
	}
}

// TestDemoStartsServer is the README's first command: with no servers
// given, the demo runs on the embedded server and says so.
func TestDemoStartsServer(t *testing.T) {
	servers(t)
	p := start(t, []string{"ZKR_SERVERS="}, "demo", "--clients", "50")
	if code := p.wait(90e9); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "embedded ZooKeeper-compatible server") {
		t.Errorf("the demo does not say which server it runs on:\n%s", p.stderr.String())
	}
	if _, ev := demoRow(t, p.stdout.String(), "predecessor"); ev > 1.0 {
		t.Errorf("predecessor recipe on zkserver: %.2f events per release, want at most 1", ev)
	}
	if _, ev := demoRow(t, p.stdout.String(), "naive"); ev <= 1.5 {
		t.Errorf("naive recipe on zkserver: %.2f events per release, want a herd", ev)
	}
}

func TestBench(t *testing.T) {
	servers(t)
	r := zkr(t, "bench", "--clients", "1,3", "--acquisitions", "20", "--rounds", "2", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	var rep benchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	var got []string
	for _, run := range rep.Runs {
		got = append(got, run.Recipe+"/"+strconv.Itoa(run.Contenders))
		if run.PerSecond <= 0 || run.Handoff <= 0 || run.Acquisitions != 20 {
			t.Errorf("implausible run (want 20 acquisitions, in two rounds): %+v", run)
		}
	}
	want := "zkrecipes/1 zkrecipes-requeue/1 floor/1 zkrecipes/3 zkrecipes-requeue/3 floor/3"
	if strings.Join(got, " ") != want {
		t.Errorf("runs %v, want %s", got, want)
	}
	r = zkr(t, "bench", "--chain", "--clients", "3", "--acquisitions", "10", "--json")
	if r.code != 0 {
		t.Fatalf("--chain: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	rep = benchReport{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--chain --json: %v\n%s", err, r.stdout)
	}
	got = nil
	for _, run := range rep.Runs {
		got = append(got, run.Recipe+"/"+strconv.Itoa(run.Contenders))
		if !run.Chain || run.Acquisitions < 10 || run.Handoff <= 0 || run.EventsPerRelease != 1 {
			t.Errorf("implausible chain run: %+v", run)
		}
		// Rounds of three sessions: three releases per two handoffs,
		// counted by ZooKeeper (zkserver has no such counters).
		if shared.Embedded() {
			if run.ServerWrites != -1 {
				t.Errorf("%s chain on zkserver: %v server writes per acquisition, want -1 (not counted)", run.Recipe, run.ServerWrites)
			}
		} else if run.ServerWrites < 1.5 || run.ServerWrites > 1.6 {
			t.Errorf("%s chain: the server counted %v writes per acquisition, want 1.5", run.Recipe, run.ServerWrites)
		}
	}
	if want := "zkrecipes/3 floor/3"; strings.Join(got, " ") != want {
		t.Errorf("chain runs %v, want %s", got, want)
	}
	r = zkr(t, "bench", "--clients", "2", "--acquisitions", "10", "--recipes", "zkrecipes")
	if r.code != 0 || !strings.Contains(r.stdout, "zkrecipes Mutex") || !strings.Contains(r.stdout, "SRV WRITES/ACQ") {
		t.Errorf("bench table: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
