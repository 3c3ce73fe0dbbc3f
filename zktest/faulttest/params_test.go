package faulttest

import (
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/nemesis"
)

// The seed and span: the environment over the config, the config over the
// defaults; bad values are named.
func TestParams(t *testing.T) {
	if *seedFlag != 0 || *durationFlag != 0 {
		t.Skip("-faulttest.seed or -faulttest.duration given")
	}
	t.Setenv("FAULTTEST_SEED", "")
	t.Setenv("FAULTTEST_DURATION", "")
	seed, span, err := params(Config{})
	if err != nil || seed == 0 || seed >= 1<<53+1 || span != DefaultDuration {
		t.Errorf("defaults: seed %d, span %v, %v", seed, span, err)
	}
	seed, span, err = params(Config{Seed: 7, Duration: time.Minute})
	if err != nil || seed != 7 || span != time.Minute {
		t.Errorf("config: seed %d, span %v, %v", seed, span, err)
	}
	t.Setenv("FAULTTEST_SEED", "12345")
	t.Setenv("FAULTTEST_DURATION", "2m")
	seed, span, err = params(Config{Seed: 7, Duration: time.Minute})
	if err != nil || seed != 12345 || span != 2*time.Minute {
		t.Errorf("environment: seed %d, span %v, %v", seed, span, err)
	}
	for _, env := range [][2]string{{"FAULTTEST_SEED", "x1"}, {"FAULTTEST_DURATION", "ten"}} {
		t.Run(env[0], func(t *testing.T) {
			t.Setenv(env[0], env[1])
			if _, _, err := params(Config{}); err == nil || !strings.Contains(err.Error(), env[0]+`="`+env[1]+`"`) {
				t.Errorf("%s=%s: %v, want an error naming it", env[0], env[1], err)
			}
		})
	}
}

// The public fault kinds are the schedule's, every one of them.
func TestFaults(t *testing.T) {
	public := []Fault{KillMember, PauseMember, LoseQuorum, CutOff, BlackholeLink, DelayClient, CutAfterRequest, ForceExpiry, SlowThenStall}
	if len(public) != len(nemesis.AllFaults) {
		t.Fatalf("%d public fault kinds, the schedule has %d", len(public), len(nemesis.AllFaults))
	}
	for i, f := range public {
		if nemesis.FaultKind(f) != nemesis.AllFaults[i] || f.String() != nemesis.AllFaults[i].String() {
			t.Errorf("fault %d: %v, the schedule's %v", i, f, nemesis.AllFaults[i])
		}
	}
}

// A Config that cannot be run is refused, naming what is wrong.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Clients: -1}, "Config.Clients -1"},
		{Config{SessionTimeout: -time.Second}, "Config.SessionTimeout -1s"},
		{Config{ProgressBound: -time.Second}, "Config.ProgressBound -1s"},
		{Config{Faults: []Fault{CutOff, 42}}, "unknown fault 42"},
		{Config{Permits: map[string]int{"sem": 0}}, `Config.Permits["sem"] is 0`},
	} {
		if err := tc.cfg.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.cfg, err, tc.want)
		}
	}
	if err := (Config{Faults: []Fault{KillMember, SlowThenStall}, Permits: map[string]int{"sem": 2}}).validate(); err != nil {
		t.Errorf("a valid config: %v", err)
	}
}

// The checker's property names as the package documents them.
func TestPublicProperty(t *testing.T) {
	for in, want := range map[string]string{
		nemesis.PropExclusion: "exclusion", nemesis.PropToken: "token", nemesis.PropRegister: "fence",
		nemesis.PropHarness: "outside-holding", nemesis.PropLost: "lost", nemesis.PropProgress: "progress",
		nemesis.PropLeftover: "leftover", nemesis.PropError: "error",
	} {
		if got := publicProperty(in); got != want {
			t.Errorf("publicProperty(%q) = %q, want %q", in, got, want)
		}
	}
	if got := pathSafe("TestX/sub\ncase"); got != "TestX_sub_case" {
		t.Errorf("pathSafe: %q", got)
	}
}
