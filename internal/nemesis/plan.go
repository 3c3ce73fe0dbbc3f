package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// FaultKind is a kind of fault the scheduler can choose.
type FaultKind int

// The faults. Member faults act on a ZooKeeper process, client faults on
// the proxies between one client and the members.
const (
	// KillMember kills a member with SIGKILL (the leader, the member a
	// lock holder is connected to, or a given one) and restarts it.
	KillMember FaultKind = iota + 1
	// PauseMember stalls a member with SIGSTOP, then SIGCONT.
	PauseMember
	// LoseQuorum kills or stalls two members at once, then brings them
	// back.
	LoseQuorum
	// CutOff silences every link of one client past its session timeout
	// (blackholed, or cut and refused), so the server expires the session.
	CutOff
	// BlackholeLink silences (or pauses, holding the bytes) the one link
	// the client is using, for a while: it moves to another member.
	BlackholeLink
	// DelayClient delays every byte of one client's links, sometimes by
	// nearly the strict margin's tolerance.
	DelayClient
	// CutAfterRequest cuts one client's connection right after a chosen
	// request (create, delete, multi, getChildren2), forwarded to the
	// server or not.
	CutAfterRequest
	// ForceExpiry expires one client's session on the server on purpose.
	ForceExpiry
	// SlowThenStall delays one client's links, then stalls (SIGSTOP) the
	// member it is connected to past its session timeout: the slow-link
	// overlap scenario, which needs strict mode to be sound.
	SlowThenStall
)

// AllFaults lists every fault kind, in declaration order.
var AllFaults = []FaultKind{KillMember, PauseMember, LoseQuorum, CutOff, BlackholeLink, DelayClient, CutAfterRequest, ForceExpiry, SlowThenStall}

var faultNames = map[FaultKind]string{
	KillMember: "kill", PauseMember: "pause", LoseQuorum: "quorum", CutOff: "cutoff",
	BlackholeLink: "link", DelayClient: "delay", CutAfterRequest: "cut", ForceExpiry: "expire",
	SlowThenStall: "slowstall",
}

func (k FaultKind) String() string {
	if s, ok := faultNames[k]; ok {
		return s
	}
	return fmt.Sprintf("fault(%d)", int(k))
}

// Target says which member a member fault hits. The leader and a holder's
// member are only known at run time.
type Target int

// Member targets.
const (
	TargetMember Target = iota // Fault.Member
	TargetLeader               // the leader (Fault.Member if none is found)
	TargetHolder               // the member a mutex holder's session is connected to (else the leader)
)

func (t Target) String() string {
	switch t {
	case TargetLeader:
		return "leader"
	case TargetHolder:
		return "holder's member"
	}
	return "member"
}

// Fault is one planned fault. Which fields matter depends on Kind.
type Fault struct {
	Kind     FaultKind
	Target   Target        // member faults
	Member   int           // the member, or the fallback of a run-time target
	Other    int           // LoseQuorum: the second member
	Stall    bool          // LoseQuorum: SIGSTOP instead of SIGKILL; CutOff: blackhole instead of refusing; BlackholeLink: pause (hold the bytes) instead of dropping them
	Client   int           // client faults
	Duration time.Duration // how long the fault lasts (SlowThenStall: the stall)
	Delay    time.Duration // DelayClient, SlowThenStall: the delay of each byte, each way
	Lead     time.Duration // SlowThenStall: how long the link is slow before the stall
	Opcode   int32         // CutAfterRequest
	Forward  bool          // CutAfterRequest: the request reaches the server
	Gap      time.Duration // the quiet time after the fault is healed
}

var opcodeNames = map[int32]string{
	jute.OpCreate: "create", jute.OpDelete: "delete", jute.OpMulti: "multi", jute.OpGetChildren2: "getChildren2",
}

func (f Fault) String() string {
	var s string
	switch f.Kind {
	case KillMember, PauseMember:
		s = fmt.Sprintf("%s %s (else member %d) for %v", f.Kind, f.Target, f.Member, f.Duration)
	case LoseQuorum:
		how := "killed"
		if f.Stall {
			how = "stalled"
		}
		s = fmt.Sprintf("%s members %d and %d %s for %v", f.Kind, f.Member, f.Other, how, f.Duration)
	case CutOff:
		how := "refused"
		if f.Stall {
			how = "blackholed"
		}
		s = fmt.Sprintf("%s client %d %s for %v", f.Kind, f.Client, how, f.Duration)
	case BlackholeLink:
		how := "blackholed"
		if f.Stall {
			how = "paused"
		}
		s = fmt.Sprintf("%s client %d's current link %s for %v", f.Kind, f.Client, how, f.Duration)
	case DelayClient:
		s = fmt.Sprintf("%s client %d by %v each way for %v", f.Kind, f.Client, f.Delay, f.Duration)
	case CutAfterRequest:
		s = fmt.Sprintf("%s client %d after its next %s (forwarded=%v), waiting up to %v", f.Kind, f.Client, opcodeNames[f.Opcode], f.Forward, f.Duration)
	case ForceExpiry:
		s = fmt.Sprintf("%s client %d's session", f.Kind, f.Client)
	case SlowThenStall:
		s = fmt.Sprintf("%s client %d delayed %v each way for %v, then its member stalled for %v", f.Kind, f.Client, f.Delay, f.Lead, f.Duration)
	default:
		s = f.Kind.String()
	}
	return s + fmt.Sprintf(", gap %v", f.Gap)
}

// PlanConfig is what NewPlan draws from.
type PlanConfig struct {
	Seed           uint64
	Span           time.Duration // the planned faults' estimated total time
	Clients        int           // clients 0..Clients-1
	MutexClients   int           // clients 0..MutexClients-1 run the mutex workload (the only users of multi)
	Members        int           // ensemble size
	SessionTimeout time.Duration
	StrictMargin   time.Duration // strict mode's margin (half the session timeout)
	Faults         []FaultKind   // enabled kinds (all if empty)
}

// restartCost is what the plan expects a member restart to take.
const restartCost = 3 * time.Second

// NewPlan draws the faults of a run from the seed. The faults come in
// rounds, each a shuffle of every enabled kind, so that even a short run
// has each kind once: the first round is always complete, and further
// rounds follow while the estimated total is below the span. Every choice
// is made here; the same config gives the same plan.
func NewPlan(cfg PlanConfig) []Fault {
	kinds := cfg.Faults
	if len(kinds) == 0 {
		kinds = AllFaults
	}
	if cfg.Members < 3 {
		// Losing the quorum takes two members out of at least three.
		kinds = slices.DeleteFunc(slices.Clone(kinds), func(k FaultKind) bool { return k == LoseQuorum })
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x6e656d65736973)) // "nemesis"
	dur := func(lo, hi time.Duration) time.Duration {
		return (lo + time.Duration(rng.Int64N(int64(hi-lo)+1))).Round(10 * time.Millisecond)
	}
	T := cfg.SessionTimeout
	var plan []Fault
	var total time.Duration
	for round := 0; round == 0 || total < cfg.Span; round++ {
		order := append([]FaultKind(nil), kinds...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, k := range order {
			if round > 0 && total >= cfg.Span {
				break
			}
			f := Fault{Kind: k, Member: rng.IntN(cfg.Members), Client: rng.IntN(cfg.Clients), Gap: dur(500*time.Millisecond, 1500*time.Millisecond)}
			cost := f.Gap
			switch k {
			case KillMember:
				f.Target = Target(rng.IntN(3))
				f.Duration = dur(500*time.Millisecond, 2500*time.Millisecond)
				cost += restartCost
			case PauseMember:
				f.Target = Target(rng.IntN(3))
				// Up to past the session timeout: its clients move.
				f.Duration = dur(500*time.Millisecond, T+1500*time.Millisecond)
			case LoseQuorum:
				f.Other = (f.Member + 1 + rng.IntN(cfg.Members-1)) % cfg.Members
				f.Stall = rng.IntN(2) == 0
				f.Duration = dur(time.Second, 4*time.Second)
				if !f.Stall {
					cost += 2 * restartCost
				}
			case CutOff:
				f.Stall = rng.IntN(2) == 0
				f.Duration = T + dur(500*time.Millisecond, 1500*time.Millisecond)
			case BlackholeLink:
				f.Stall = rng.IntN(2) == 0
				f.Duration = dur(time.Second, T+time.Second)
			case DelayClient:
				if rng.IntN(2) == 0 {
					// Near the strict margin: holdings stay valid while
					// the round trip is below 3/4 of the margin, that is
					// each way below 3/8 of it; these straddle that line
					// and go up to a round trip of nearly the margin.
					f.Delay = dur(cfg.StrictMargin/4, cfg.StrictMargin*9/20)
				} else {
					f.Delay = dur(10*time.Millisecond, cfg.StrictMargin/5)
				}
				f.Duration = dur(2*time.Second, 4*time.Second)
			case CutAfterRequest:
				ops := []int32{jute.OpCreate, jute.OpDelete, jute.OpMulti, jute.OpGetChildren2}
				f.Opcode = ops[rng.IntN(len(ops))]
				f.Forward = rng.IntN(2) == 0
				if f.Opcode == jute.OpMulti && cfg.MutexClients > 0 {
					f.Client = rng.IntN(cfg.MutexClients) // only Requeue sends a multi
				}
				f.Duration = 5 * time.Second // a multi comes only with a Requeue
			case ForceExpiry:
				f.Duration = 0
				cost += 500 * time.Millisecond
			case SlowThenStall:
				// From a link well inside the margin to one whose round trip
				// exceeds it (holdings then read as lost from the start).
				f.Delay = dur(cfg.StrictMargin/10, cfg.StrictMargin*3/4)
				f.Lead = dur(time.Second, 2*time.Second)
				f.Duration = T + dur(500*time.Millisecond, 1500*time.Millisecond)
				cost += f.Lead
			}
			cost += f.Duration
			plan = append(plan, f)
			total += cost
		}
	}
	return plan
}
