package nemesis

import (
	"reflect"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

func planConfig(seed uint64, span time.Duration) PlanConfig {
	return PlanConfig{Seed: seed, Span: span, Clients: 7, MutexClients: 5, Members: 3,
		SessionTimeout: 3 * time.Second, StrictMargin: 1500 * time.Millisecond}
}

// TestPlanReproducible: the same seed makes the same fault choices; another
// seed makes others.
func TestPlanReproducible(t *testing.T) {
	a := NewPlan(planConfig(7, 50*time.Second))
	b := NewPlan(planConfig(7, 50*time.Second))
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 7 gave two plans:\n%v\n%v", a, b)
	}
	if c := NewPlan(planConfig(8, 50*time.Second)); reflect.DeepEqual(a, c) {
		t.Fatalf("seeds 7 and 8 gave the same plan %v", a)
	}
	// A longer span extends the plan; it does not change its start.
	long := NewPlan(planConfig(7, 10*time.Minute))
	if len(long) <= len(a) || !reflect.DeepEqual(long[:len(AllFaults)], a[:len(AllFaults)]) {
		t.Errorf("the 10-minute plan does not begin with the 50-second plan's first round")
	}
}

// TestPlanCoverage: every plan has each enabled kind, even a short one,
// and its choices stay in range.
func TestPlanCoverage(t *testing.T) {
	nearMargin := 0
	for seed := uint64(1); seed <= 200; seed++ {
		plan := NewPlan(planConfig(seed, 50*time.Second))
		kinds := map[FaultKind]bool{}
		for _, f := range plan {
			kinds[f.Kind] = true
			if f.Client < 0 || f.Client >= 7 || f.Member < 0 || f.Member >= 3 {
				t.Fatalf("seed %d: %v out of range", seed, f)
			}
			switch f.Kind {
			case LoseQuorum:
				if f.Other == f.Member || f.Other < 0 || f.Other >= 3 {
					t.Fatalf("seed %d: quorum loss of members %d and %d", seed, f.Member, f.Other)
				}
			case CutOff, SlowThenStall:
				if f.Duration <= 3*time.Second {
					t.Fatalf("seed %d: %v does not outlast the session timeout", seed, f)
				}
			case CutAfterRequest:
				if _, ok := opcodeNames[f.Opcode]; !ok {
					t.Fatalf("seed %d: cut after opcode %d", seed, f.Opcode)
				}
				if f.Opcode == jute.OpMulti && f.Client >= 5 {
					t.Fatalf("seed %d: a multi cut on client %d, which runs no mutex", seed, f.Client)
				}
			case DelayClient:
				// Holdings stay valid while each way is below 3/8 of
				// the 1.5 s margin (562 ms).
				if f.Delay >= 375*time.Millisecond {
					nearMargin++
				}
			}
		}
		for _, k := range AllFaults {
			if !kinds[k] {
				t.Fatalf("seed %d: the plan has no %v: %v", seed, k, plan)
			}
		}
	}
	if nearMargin < 50 {
		t.Errorf("only %d of 200 plans delay a client near the strict margin", nearMargin)
	}
	only := NewPlan(PlanConfig{Seed: 3, Span: time.Minute, Clients: 2, Members: 3, SessionTimeout: time.Second,
		StrictMargin: 500 * time.Millisecond, Faults: []FaultKind{ForceExpiry}})
	for _, f := range only {
		if f.Kind != ForceExpiry {
			t.Fatalf("a plan of forced expiries has %v", f)
		}
	}
}
