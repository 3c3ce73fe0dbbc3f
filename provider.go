package zkrecipes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNoInstances is returned by [Provider.Instance] when no instance of
// the service is usable: none registered, or all disabled, filtered out or
// down.
var ErrNoInstances = errors.New("zkrecipes: no usable service instance")

// ErrStaleInstances is wrapped by the error of [ServiceCache.Stale], and
// of [Provider.Instance] then: the server has answered the cache's Session
// nothing for longer than the session timeout, so the copy may hold
// instances gone since.
var ErrStaleInstances = errors.New("zkrecipes: service instances may be stale")

// Strategy picks one instance among the usable ones, as Curator's
// ProviderStrategy. Pick is given the instances sorted by id, at least one,
// and must be safe for concurrent use; the slice is shared, not to be
// modified.
type Strategy interface {
	Pick(instances []ServiceInstance) ServiceInstance
}

// RoundRobin returns a strategy that picks the instances in turn (by their
// position in the id order), as Curator's RoundRobinStrategy. Each call
// returns a new strategy with its own counter.
func RoundRobin() Strategy { return new(roundRobin) }

type roundRobin struct{ next atomic.Uint64 }

func (r *roundRobin) Pick(insts []ServiceInstance) ServiceInstance {
	return insts[(r.next.Add(1)-1)%uint64(len(insts))]
}

// Random returns a strategy that picks an instance at random, as Curator's
// RandomStrategy (the default).
func Random() Strategy { return randomStrategy{} }

type randomStrategy struct{}

func (randomStrategy) Pick(insts []ServiceInstance) ServiceInstance {
	return insts[rand.IntN(len(insts))]
}

// Sticky returns a strategy that keeps picking the same instance while it
// is usable (registered, enabled, passing the filters, not down), and picks
// a new one with then when it is not, as Curator's StickyStrategy.
func Sticky(then Strategy) Strategy { return &sticky{then: then} }

type sticky struct {
	then Strategy
	mu   sync.Mutex
	cur  string // the instance's id, "" for none
}

func (s *sticky) Pick(insts []ServiceInstance) ServiceInstance {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range insts {
		if in.ID == s.cur {
			return in
		}
	}
	in := s.then.Pick(insts)
	s.cur = in.ID
	return in
}

// DownPolicy says when a [Provider] skips an instance reported failing
// (see [Provider.NoteError]), as Curator's DownInstancePolicy: an instance
// reported Errors times within Window (counted from its first report) is
// down, skipped for Timeout from the report that made it down. The zero
// value is Curator's default: 2 errors, 30 s, 30 s.
type DownPolicy struct {
	Errors  int           // reports that make an instance down (0: 2)
	Window  time.Duration // the window the reports are counted in (0: 30 s)
	Timeout time.Duration // how long a down instance is skipped (0: 30 s)
}

func (p DownPolicy) withDefaults() DownPolicy {
	if p.Errors <= 0 {
		p.Errors = 2
	}
	if p.Window <= 0 {
		p.Window = 30 * time.Second
	}
	if p.Timeout <= 0 {
		p.Timeout = 30 * time.Second
	}
	return p
}

// downList tracks the instances reported failing, by endpoint (id, address
// and ports: an instance registered again elsewhere under its id starts
// afresh).
type downList struct {
	p   DownPolicy
	now func() time.Time

	mu sync.Mutex
	m  map[string]*downStatus
}

type downStatus struct {
	first time.Time // the first report counted
	n     int       // reports since first
	until time.Time // down until (zero: not down)
}

func endpointKey(in ServiceInstance) string {
	return in.ID + "\x00" + in.Address + "\x00" + strconv.Itoa(in.Port) + "\x00" + strconv.Itoa(in.SSLPort)
}

func (d *downList) note(in ServiceInstance) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.purgeLocked(now)
	k := endpointKey(in)
	st := d.m[k]
	if st == nil || now.Sub(st.first) >= d.p.Window {
		st = &downStatus{first: now}
		d.m[k] = st
	}
	if st.n++; st.n >= d.p.Errors && st.until.IsZero() {
		st.until = now.Add(d.p.Timeout)
	}
}

// up reports whether in is not down.
func (d *downList) up(in ServiceInstance, now time.Time) bool {
	st := d.m[endpointKey(in)]
	return st == nil || st.until.IsZero() || !now.Before(st.until)
}

// purgeLocked forgets the statuses that no longer count.
func (d *downList) purgeLocked(now time.Time) {
	for k, st := range d.m {
		if now.Sub(st.first) >= d.p.Window && (st.until.IsZero() || !now.Before(st.until)) {
			delete(d.m, k)
		}
	}
}

// ProviderOption configures a Provider.
type ProviderOption func(*providerConfig)

type providerConfig struct {
	strategy Strategy
	filters  []func(ServiceInstance) bool
	down     DownPolicy
	now      func() time.Time
}

// WithStrategy makes a Provider pick with s (default: [Random]).
func WithStrategy(s Strategy) ProviderOption { return func(c *providerConfig) { c.strategy = s } }

// WithFilter makes a Provider use only the instances keep returns true for
// (Curator's InstanceFilter); several filters all apply. keep must be fast
// and safe for concurrent use: it runs at each pick.
func WithFilter(keep func(ServiceInstance) bool) ProviderOption {
	return func(c *providerConfig) { c.filters = append(c.filters, keep) }
}

// WithDownPolicy sets when a Provider skips the instances reported failing
// (default: the zero DownPolicy, Curator's).
func WithDownPolicy(p DownPolicy) ProviderOption { return func(c *providerConfig) { c.down = p } }

// Provider picks an instance of a service to call, as Curator's
// ServiceProvider: from a [ServiceCache] (one watch, shared), it keeps the
// instances that are enabled (see ServiceInstance.Disabled), pass the
// filters (WithFilter) and are not down (see [DownPolicy],
// [Provider.NoteError]), and picks one with its strategy (WithStrategy). It
// sees the instances Curator's ServiceProvider sees on the same base path.
//
// A pick costs no request. A Provider is safe for concurrent use.
type Provider struct {
	c        *ServiceCache
	strategy Strategy
	filters  []func(ServiceInstance) bool
	down     *downList
}

// Provider returns a Provider of the service name, on the shared
// [ServiceCache] of the service (ctx bounds its load when it is the first).
// Close it when done with it.
func (d *Discovery) Provider(ctx context.Context, name string, opts ...ProviderOption) (*Provider, error) {
	cfg := providerConfig{now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.strategy == nil {
		cfg.strategy = Random()
	}
	c, err := d.ServiceCache(ctx, name)
	if err != nil {
		return nil, err
	}
	return &Provider{
		c: c, strategy: cfg.strategy, filters: cfg.filters,
		down: &downList{p: cfg.down.withDefaults(), now: cfg.now, m: make(map[string]*downStatus)},
	}, nil
}

// Instances returns the usable instances, sorted by id (Curator's
// getAllInstances): enabled, passing the filters, not down; none while the
// cache is stale (see [ServiceCache.Stale]).
func (p *Provider) Instances() []ServiceInstance {
	if p.c.Stale() != nil {
		return nil
	}
	all := p.c.Instances()
	now := p.down.now()
	var out []ServiceInstance
	p.down.mu.Lock()
	for _, in := range all {
		if !in.Disabled && p.down.up(in, now) {
			out = append(out, in)
		}
	}
	p.down.mu.Unlock()
	return slices.DeleteFunc(out, func(in ServiceInstance) bool {
		for _, keep := range p.filters {
			if !keep(in) {
				return true
			}
		}
		return false
	})
}

// Instance picks a usable instance with the strategy, or returns an error
// wrapping [ErrNoInstances] when there is none (Curator's getInstance).
// Like Curator's, it does not fall back on a down instance when all are
// down. Unlike Curator's, it picks nothing from a stale cache: the error
// then wraps [ServiceCache.Stale]'s too ([ErrStaleInstances], or the
// cache's end, [ErrSessionExpired] say), so that no instance gone for
// longer than the bound [ServiceCache] documents is picked. Pick again for
// each call: do not keep the instance.
func (p *Provider) Instance() (ServiceInstance, error) {
	if err := p.c.Stale(); err != nil {
		return ServiceInstance{}, fmt.Errorf("service %q: %w: %w", p.c.Name(), ErrNoInstances, err)
	}
	insts := p.Instances()
	if len(insts) == 0 {
		return ServiceInstance{}, fmt.Errorf("service %q: %w (%d registered)", p.c.Name(), ErrNoInstances, len(p.c.Instances()))
	}
	return p.strategy.Pick(insts), nil
}

// NoteError reports that a call to in failed (Curator's noteError): see
// [DownPolicy].
func (p *Provider) NoteError(in ServiceInstance) { p.down.note(in) }

// Cache returns the ServiceCache the Provider reads (for Changed, Done,
// Err); it is closed with the Provider.
func (p *Provider) Cache() *ServiceCache { return p.c }

// Close releases the Provider's ServiceCache.
func (p *Provider) Close() error { return p.c.Close() }

// Payload decodes the payload of in into a T. An object payload written by
// Curator (Jackson) for a Java class names it in an "@class" member, which
// is dropped before decoding. A missing (null) payload decodes as T's zero
// value. Errors name the instance.
func Payload[T any](in ServiceInstance) (T, error) {
	var v T
	if len(in.Payload) == 0 {
		return v, nil
	}
	raw := []byte(in.Payload)
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err == nil {
			if _, ok := obj["@class"]; ok {
				delete(obj, "@class")
				raw, _ = json.Marshal(obj)
			}
		}
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("payload of instance %s/%s: %w", in.Name, in.ID, err)
	}
	return v, nil
}

// MarshalPayload encodes v as an instance's payload. For Curator's
// JsonInstanceSerializer to read it as the Java class javaClass (a POJO
// whose properties match v's JSON), v must encode as a JSON object and
// javaClass is written in its "@class" member, as Jackson does; with
// javaClass "" the payload is written as is (Java reads an object as a Map,
// a string as a String).
func MarshalPayload(v any, javaClass string) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrInvalidArgument, err)
	}
	if javaClass == "" {
		return b, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: payload for Java class %s: %T does not encode as a JSON object", ErrInvalidArgument, javaClass, v)
	}
	cls, _ := json.Marshal(javaClass)
	// "@class" first, as Jackson writes it.
	var out bytes.Buffer
	out.WriteString(`{"@class":`)
	out.Write(cls)
	rest := bytes.TrimSpace(b)[1:]
	if t := bytes.TrimSpace(rest); len(t) > 0 && t[0] != '}' {
		if _, dup := obj["@class"]; dup {
			return nil, fmt.Errorf("%w: payload for Java class %s has an @class member of its own", ErrInvalidArgument, javaClass)
		}
		out.WriteByte(',')
	}
	out.Write(rest)
	return out.Bytes(), nil
}
