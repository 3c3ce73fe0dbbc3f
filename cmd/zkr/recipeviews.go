package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// This file recognises the recipes that are not a line of contenders
// (zkrecipes.Inspect shows those) from their node layouts, for zkr inspect
// and the console: a semaphore (Curator's InterProcessSemaphoreV2, and
// zkrecipes.Semaphore), a work queue (Curator's SimpleDistributedQueue,
// kazoo's Queue, zkrecipes.Queue), a locking queue (kazoo's LockingQueue,
// zkrecipes.LockingQueue), a double barrier, a group (Curator's
// GroupMember, zkrecipes.JoinGroup) and a service's instances (Curator's
// ServiceDiscovery, zkrecipes.Discovery). The layouts are those the
// library's recipes write (see their doc comments).

// treeReader reads a subtree: from the server (zkr inspect) or from a
// Cache's copy (the console).
type treeReader interface {
	children(ctx context.Context, path string) ([]string, error)
	// get returns the node's data and stat; ok false if it is gone.
	get(ctx context.Context, path string) (data []byte, st zkclient.Stat, ok bool, err error)
}

// serverReader reads from the server through s.
type serverReader struct{ s *zkrecipes.Session }

func (r serverReader) children(ctx context.Context, path string) ([]string, error) {
	kids, _, err := r.s.Children(ctx, path)
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil, nil
	}
	return kids, err
}

func (r serverReader) get(ctx context.Context, path string) ([]byte, zkclient.Stat, bool, error) {
	data, st, err := r.s.Get(ctx, path)
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil, st, false, nil
	}
	return data, st, err == nil, err
}

// cacheReader reads a Cache's copy: no request.
type cacheReader struct{ c *zkrecipes.Cache }

func (r cacheReader) children(_ context.Context, path string) ([]string, error) {
	return r.c.Children(path), nil
}

func (r cacheReader) get(_ context.Context, path string) ([]byte, zkclient.Stat, bool, error) {
	data, st, ok := r.c.Get(path)
	return data, st, ok, nil
}

// Node names of the layouts recognised here.
var (
	// leaseName is a semaphore's lease: "_c_<uuid>-lease-<seq>".
	leaseName = regexp.MustCompile(`lease-(\d{10}|-\d{9,10})$`)
	// itemName is a work queue's item: Curator's "qn-<seq>", kazoo's
	// "entry-<priority>-<seq>".
	itemName = regexp.MustCompile(`^(qn-|entry-\d{3}-)(\d{10}|-\d{9,10})$`)
	// uuidName is a name that is a whole UUID, as a double barrier's
	// participants are named: Curator's and zkrecipes' "8-4-4-4-12" form,
	// kazoo's 32 hex digits.
	uuidName = regexp.MustCompile(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})$`)
)

// seqNumber returns the sequence number that ends a sequential node's
// name: ten digits, or, once the counter has wrapped, a minus sign and
// nine or ten digits (ZooKeeper's %010d). A name that is a whole UUID has
// none, though about one UUID in a hundred ends in ten decimal digits.
func seqNumber(name string) (int64, bool) {
	if uuidName.MatchString(name) {
		return 0, false
	}
	for _, width := range []int{10, 11} {
		if len(name) < width {
			continue
		}
		tail := name[len(name)-width:]
		if width == 11 && tail[0] != '-' {
			continue
		}
		if strings.Trim(strings.TrimPrefix(tail, "-"), "0123456789") != "" {
			continue
		}
		if v, err := strconv.ParseInt(tail, 10, 32); err == nil {
			return v, true
		}
	}
	return 0, false
}

// sequential reports whether name is a sequential node's: whether it ends
// in a sequence number (see seqNumber).
func sequential(name string) bool {
	_, ok := seqNumber(name)
	return ok
}

// The layouts' fixed names.
const (
	semLeases    = "leases"  // a semaphore's lease nodes' parent
	semLocks     = "locks"   // its acquirers' mutex
	lqEntries    = "entries" // a locking queue's items
	lqTaken      = "taken"   // its consumers' locks on items
	barrierReady = "ready"   // a double barrier's "everyone entered" node
)

// maxShown is the most entries a recipe's view lists (a queue of a
// million items shows the first ones and its length).
const maxShown = 100

// recognise returns the view of the recipe whose nodes are at path, given
// its children kids, or nil if they are none of the layouts of this file.
// now is the time ages are measured at.
func recognise(ctx context.Context, r treeReader, path string, kids []string, now time.Time) (*inspection, error) {
	if len(kids) == 0 {
		return nil, nil
	}
	has := func(n string) bool { return slices.Contains(kids, n) }
	switch {
	case has(semLeases):
		return semaphoreView(ctx, r, path, kids, now)
	case has(lqEntries) && has(lqTaken):
		return lockingQueueView(ctx, r, path, kids, now)
	case slices.ContainsFunc(kids, itemName.MatchString):
		return queueView(ctx, r, path, kids, now)
	}
	// The rest are made of ephemeral nodes, without sequence numbers.
	nodes := make(map[string]node, len(kids))
	for _, k := range kids {
		data, st, ok, err := r.get(ctx, joinPath(path, k))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", joinPath(path, k), err)
		}
		if ok {
			nodes[k] = node{name: k, data: data, st: st}
		}
	}
	members := slices.DeleteFunc(slices.Clone(kids), func(k string) bool { _, ok := nodes[k]; return !ok || k == barrierReady })
	slices.Sort(members)
	if len(members) == 0 || slices.ContainsFunc(members, func(k string) bool {
		return nodes[k].st.EphemeralOwner == 0 || sequential(k)
	}) {
		return nil, nil
	}
	in := &inspection{Path: path, Exists: true, Contenders: []contenderView{}, Others: []string{}}
	if _, ready := nodes[barrierReady]; ready {
		// A double barrier whose participants all entered: "ready" is
		// there until they leave. (Before, the participants read as a
		// group.)
		in.Recipe = "double barrier"
		for _, k := range members {
			in.add(nodes[k], "participant", "entered", now)
		}
		return in, nil
	}
	in.Recipe = "service"
	for _, k := range members {
		if _, ok := serviceInstance(nodes[k].data); !ok {
			in.Recipe = "group"
			break
		}
	}
	for _, k := range members {
		n := nodes[k]
		if in.Recipe == "service" {
			si, _ := serviceInstance(n.data)
			cv := in.add(n, "instance", "registered", now)
			cv.ID = si.Address
			if si.Port != nil {
				cv.ID += ":" + strconv.Itoa(*si.Port)
			}
			if si.Enabled != nil && !*si.Enabled {
				cv.State = "disabled"
			}
			continue
		}
		in.add(n, "member", "member", now)
	}
	return in, nil
}

// node is one node read for a view.
type node struct {
	name string
	data []byte
	st   zkclient.Stat
}

// add appends n to the view as an entry of kind in state, and returns it.
func (in *inspection) add(n node, kind, state string, now time.Time) *contenderView {
	created := time.UnixMilli(n.st.Ctime)
	cv := contenderView{
		Pos:     len(in.Contenders) + 1,
		Node:    n.name,
		Kind:    kind,
		State:   state,
		ID:      printable(n.data),
		Session: fmt.Sprintf("0x%x", n.st.EphemeralOwner),
		Created: created,
		Queued:  max(now.Sub(created), 0).Round(100 * time.Millisecond),
		owner:   n.st.EphemeralOwner,
	}
	cv.Seq, _ = seqNumber(n.name)
	if n.st.EphemeralOwner == 0 {
		cv.Session = "persistent"
	}
	in.Contenders = append(in.Contenders, cv)
	return &in.Contenders[len(in.Contenders)-1]
}

// readNodes reads the nodes names under dir, leaving out those gone.
func readNodes(ctx context.Context, r treeReader, dir string, names []string) ([]node, error) {
	out := make([]node, 0, len(names))
	for _, k := range names {
		data, st, ok, err := r.get(ctx, joinPath(dir, k))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", joinPath(dir, k), err)
		}
		if ok {
			out = append(out, node{name: k, data: data, st: st})
		}
	}
	return out, nil
}

// bySeq sorts names by their sequence number.
func bySeq(names []string) {
	slices.SortFunc(names, func(a, b string) int {
		x, _ := seqNumber(a)
		y, _ := seqNumber(b)
		return cmp.Compare(x, y)
	})
}

// semaphoreView: the leases held (each one's data, session and age), the
// permits (the path's data, as zkrecipes.Semaphore records them; Curator
// records none), and the acquirers queued on its mutex.
func semaphoreView(ctx context.Context, r treeReader, path string, kids []string, now time.Time) (*inspection, error) {
	in := &inspection{Path: path, Exists: true, Recipe: "semaphore", Contenders: []contenderView{}, Others: []string{}}
	if data, _, ok, err := r.get(ctx, path); err != nil {
		return nil, err
	} else if n, err := strconv.Atoi(string(data)); ok && err == nil && n > 0 {
		in.Permits = n
	}
	leases, err := r.children(ctx, joinPath(path, semLeases))
	if err != nil {
		return nil, err
	}
	leases = slices.DeleteFunc(leases, func(k string) bool { return !leaseName.MatchString(k) })
	bySeq(leases)
	ns, err := readNodes(ctx, r, joinPath(path, semLeases), leases)
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		in.add(n, "lease", "holds", now)
	}
	if slices.Contains(kids, semLocks) {
		locks, err := r.children(ctx, joinPath(path, semLocks))
		if err != nil {
			return nil, err
		}
		bySeq(locks)
		ns, err := readNodes(ctx, r, joinPath(path, semLocks), locks)
		if err != nil {
			return nil, err
		}
		for _, n := range ns {
			in.add(n, "acquirer", "waits", now)
		}
	}
	for _, k := range kids {
		if k != semLeases && k != semLocks {
			in.Others = append(in.Others, k)
		}
	}
	slices.Sort(in.Others)
	return in, nil
}

// queueView: the items in the order consumers take them (by name: kazoo's
// by priority, then arrival), the first maxShown of them.
func queueView(ctx context.Context, r treeReader, path string, kids []string, now time.Time) (*inspection, error) {
	in := &inspection{Path: path, Exists: true, Recipe: "queue", Contenders: []contenderView{}, Others: []string{}}
	items := slices.DeleteFunc(slices.Clone(kids), func(k string) bool { return !itemName.MatchString(k) })
	slices.Sort(items)
	in.Length = len(items)
	ns, err := readNodes(ctx, r, path, items[:min(len(items), maxShown)])
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		in.add(n, "item", "queued", now)
	}
	for _, k := range kids {
		if !itemName.MatchString(k) {
			in.Others = append(in.Others, k)
		}
	}
	slices.Sort(in.Others)
	return in, nil
}

// lockingQueueView: the items, each one taken by a consumer (its lock's
// data, the consumer's id) or queued.
func lockingQueueView(ctx context.Context, r treeReader, path string, kids []string, now time.Time) (*inspection, error) {
	in := &inspection{Path: path, Exists: true, Recipe: "locking queue", Contenders: []contenderView{}, Others: []string{}}
	items, err := r.children(ctx, joinPath(path, lqEntries))
	if err != nil {
		return nil, err
	}
	items = slices.DeleteFunc(items, func(k string) bool { return !itemName.MatchString(k) })
	slices.Sort(items)
	in.Length = len(items)
	ns, err := readNodes(ctx, r, joinPath(path, lqEntries), items[:min(len(items), maxShown)])
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		cv := in.add(n, "item", "queued", now)
		lock, lst, ok, err := r.get(ctx, joinPath(joinPath(path, lqTaken), n.name))
		if err != nil {
			return nil, err
		}
		if ok {
			// Taken: the consumer's session and id are the lock's.
			cv.State, cv.TakenBy = "taken", printable(lock)
			cv.Session, cv.owner = fmt.Sprintf("0x%x", lst.EphemeralOwner), lst.EphemeralOwner
		}
	}
	for _, k := range kids {
		if k != lqEntries && k != lqTaken {
			in.Others = append(in.Others, k)
		}
	}
	slices.Sort(in.Others)
	return in, nil
}

// curatorInstance is what serviceInstance reads of Curator's
// ServiceInstance JSON.
type curatorInstance struct {
	Name         *string `json:"name"`
	ID           *string `json:"id"`
	Address      string  `json:"address"`
	Port         *int    `json:"port"`
	Registration *int64  `json:"registrationTimeUTC"`
	Enabled      *bool   `json:"enabled"`
}

// serviceInstance reads data as a service instance, if it is one (a JSON
// object with a name, an id and a registration time).
func serviceInstance(data []byte) (curatorInstance, bool) {
	var si curatorInstance
	if err := json.Unmarshal(data, &si); err != nil || si.Name == nil || si.ID == nil || si.Registration == nil {
		return si, false
	}
	return si, true
}

// recipeParts tells whether name, a child of a recognised recipe's path,
// is one of its own nodes (not a recipe of its own to look for).
func recipeParts(recipe, name string) bool {
	switch recipe {
	case "semaphore":
		return name == semLeases || name == semLocks
	case "locking queue":
		return name == lqEntries || name == lqTaken
	}
	return strings.Contains(recipe, "queue") || recipe == "double barrier" || recipe == "group" || recipe == "service"
}
