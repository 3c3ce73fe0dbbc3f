package zkrecipes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// ServiceInstance is one instance of a service, as Apache Curator's service
// discovery (curator-x-discovery's ServiceInstance) describes it. Its JSON
// form, the data of its node, is the one Curator's JsonInstanceSerializer
// writes and reads.
type ServiceInstance struct {
	Name    string // the service's name
	ID      string // the instance's id, unique within the service (Register: a random UUID if empty)
	Address string // host name or IP address ("" is written as null)
	Port    int    // 0: none (null)
	SSLPort int    // 0: none (null)
	// Payload is any JSON value (nil is null). Curator's
	// JsonInstanceSerializer<T> casts it to T: a JSON string reads as a
	// String, an object as a Map (Map.class or Object.class); a Java class
	// of its own needs the object to name it in an "@class" member, as
	// Curator writes it.
	Payload json.RawMessage
	// RegistrationTime is when the instance registered, to the millisecond
	// (Register: now if zero).
	RegistrationTime time.Time
	// Type is the ServiceType: "DYNAMIC" (an ephemeral node, the default
	// and the only kind Register makes), "STATIC", "PERMANENT" or
	// "DYNAMIC_SEQUENTIAL".
	Type string
	// URISpec is Curator's UriSpec as a template: literal text and fields
	// in braces, as "{scheme}://{address}:{port}"; see URI.
	URISpec string
	// Disabled is Curator's enabled flag, inverted so that the zero value
	// is enabled. Curator 5.4 writes no flag for an enabled instance and
	// reads none as enabled; a disabled one is written "enabled": false.
	Disabled bool
}

// instanceJSON is the node data, in Curator's member order.
type instanceJSON struct {
	Name                string          `json:"name"`
	ID                  string          `json:"id"`
	Address             *string         `json:"address"`
	Port                *int            `json:"port"`
	SSLPort             *int            `json:"sslPort"`
	Payload             json.RawMessage `json:"payload"`
	RegistrationTimeUTC int64           `json:"registrationTimeUTC"`
	ServiceType         string          `json:"serviceType"`
	URISpec             *uriSpecJSON    `json:"uriSpec"`
	Enabled             *bool           `json:"enabled,omitempty"`
}

type uriSpecJSON struct {
	Parts []uriPartJSON `json:"parts"`
}

type uriPartJSON struct {
	Value    string `json:"value"`
	Variable bool   `json:"variable"`
}

// MarshalJSON writes the instance as Curator's JsonInstanceSerializer does.
func (in ServiceInstance) MarshalJSON() ([]byte, error) {
	j := instanceJSON{
		Name: in.Name, ID: in.ID, Payload: in.Payload,
		ServiceType: cmpOr(in.Type, "DYNAMIC"),
	}
	if len(j.Payload) == 0 {
		j.Payload = nil // null
	} else if !json.Valid(j.Payload) {
		return nil, fmt.Errorf("%w: service instance payload is not JSON: %q", ErrInvalidArgument, in.Payload)
	}
	if !in.RegistrationTime.IsZero() {
		j.RegistrationTimeUTC = in.RegistrationTime.UnixMilli()
	}
	if in.Address != "" {
		j.Address = &in.Address
	}
	if in.Port != 0 {
		j.Port = &in.Port
	}
	if in.SSLPort != 0 {
		j.SSLPort = &in.SSLPort
	}
	if in.URISpec != "" {
		parts, err := parseURISpec(in.URISpec)
		if err != nil {
			return nil, err
		}
		j.URISpec = &uriSpecJSON{Parts: parts}
	}
	if in.Disabled {
		f := false
		j.Enabled = &f
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads an instance as Curator's JsonInstanceSerializer
// writes it; members it does not know are ignored, as Curator does.
func (in *ServiceInstance) UnmarshalJSON(b []byte) error {
	var j instanceJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*in = ServiceInstance{Name: j.Name, ID: j.ID, Type: cmpOr(j.ServiceType, "DYNAMIC")}
	if j.Address != nil {
		in.Address = *j.Address
	}
	if j.Port != nil {
		in.Port = *j.Port
	}
	if j.SSLPort != nil {
		in.SSLPort = *j.SSLPort
	}
	if len(j.Payload) > 0 && !bytes.Equal(j.Payload, []byte("null")) {
		in.Payload = j.Payload
	}
	if j.RegistrationTimeUTC != 0 {
		in.RegistrationTime = time.UnixMilli(j.RegistrationTimeUTC)
	}
	if j.URISpec != nil {
		in.URISpec = formatURISpec(j.URISpec.Parts)
	}
	in.Disabled = j.Enabled != nil && !*j.Enabled
	return nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// parseURISpec splits a template as Curator's UriSpec does: text between
// braces is a field (trimmed), the rest literal.
func parseURISpec(spec string) ([]uriPartJSON, error) {
	var parts []uriPartJSON
	for rest := spec; rest != ""; {
		open := strings.IndexAny(rest, "{}")
		switch {
		case open < 0:
			return append(parts, uriPartJSON{Value: rest}), nil
		case rest[open] == '}':
			return nil, fmt.Errorf("%w: URI spec %q: } without {", ErrInvalidArgument, spec)
		}
		if open > 0 {
			parts = append(parts, uriPartJSON{Value: rest[:open]})
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] == '{' {
			return nil, fmt.Errorf("%w: URI spec %q: { without }", ErrInvalidArgument, spec)
		}
		if field := strings.TrimSpace(rest[open+1 : open+1+end]); field != "" {
			parts = append(parts, uriPartJSON{Value: field, Variable: true})
		}
		rest = rest[open+1+end+1:]
	}
	return parts, nil
}

// formatURISpec is parseURISpec's inverse; literal braces become Curator's
// "{[}" and "{]}" fields.
func formatURISpec(parts []uriPartJSON) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Variable {
			b.WriteString("{" + p.Value + "}")
			continue
		}
		b.WriteString(strings.NewReplacer("{", "{[}", "}", "{]}").Replace(p.Value))
	}
	return b.String()
}

// URI fills in the instance's URISpec, as Curator's buildUriSpec does:
// {scheme} is "https" if the instance has an SSL port, else "http";
// {name}, {id}, {address}, {port}, {ssl-port}, {registration-time-utc}
// and {service-type} come from the instance; "{[}" and "{]}" are literal
// braces; vars add fields or override these. A field without a value is
// left out. Without a URISpec, URI returns "".
func (in ServiceInstance) URI(vars map[string]string) string {
	parts, err := parseURISpec(in.URISpec)
	if err != nil {
		return ""
	}
	num := func(n int) string {
		if n == 0 {
			return ""
		}
		return strconv.Itoa(n)
	}
	fields := map[string]string{
		"[": "{", "]": "}", "scheme": "http",
		"name": in.Name, "id": in.ID, "address": in.Address,
		"port": num(in.Port), "ssl-port": num(in.SSLPort),
		"registration-time-utc": strconv.FormatInt(in.RegistrationTime.UnixMilli(), 10),
		"service-type":          strings.ToLower(cmpOr(in.Type, "DYNAMIC")),
	}
	if in.SSLPort != 0 {
		fields["scheme"] = "https"
	}
	if in.RegistrationTime.IsZero() {
		fields["registration-time-utc"] = "0"
	}
	for k, v := range vars {
		fields[k] = v
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Variable {
			b.WriteString(fields[p.Value])
		} else {
			b.WriteString(p.Value)
		}
	}
	return b.String()
}

// Discovery is service discovery on a base path, in the layout of Apache
// Curator's ServiceDiscovery: each instance of a service is a node
// "<base>/<service name>/<instance id>" whose data is the instance as JSON
// (see ServiceInstance). A Java service using Curator's ServiceDiscovery on
// the same base path sees the instances registered from Go, and Go sees
// Java's.
//
// A Discovery holds no state of its own; it is safe for concurrent use.
type Discovery struct {
	s    *Session
	base string
	err  error
}

// NewDiscovery returns the service discovery on basePath for the session s.
// A bad path is reported, without any network call, by every method.
func NewDiscovery(s *Session, basePath string) *Discovery {
	return &Discovery{s: s, base: basePath, err: checkPath(basePath)}
}

// checkSegment refuses a service name or instance id that is not one path
// segment.
func (d *Discovery) checkSegment(what, v string) error {
	if v == "" || v == "." || v == ".." || strings.Contains(v, "/") {
		return fmt.Errorf("%w: %s %q is not one path segment", ErrInvalidArgument, what, v)
	}
	return checkPath(d.base + "/" + v)
}

// Registration is an instance registered by this session: an ephemeral node
// that lives until Unregister or the end of the session. It is a Group
// membership (see JoinGroup) in the service's group, and its errors are
// worded so. Its methods are safe to call concurrently.
type Registration struct {
	g *Group

	mu   sync.Mutex // serialises Update; guards inst
	inst ServiceInstance
}

// Register registers inst under its Name and ID as an ephemeral node
// (Curator's DYNAMIC type), its missing parents as containers, as Curator
// does. An empty ID becomes a random UUID, a zero RegistrationTime now and
// an empty Type "DYNAMIC" (Registration.Instance tells them). If a node with this id exists and
// belongs to another live session, Register returns an error wrapping
// ErrMemberExists: unlike Curator, which deletes it and registers anew, it
// never takes a live instance over (KeepRegistered waits for it to go). If
// it belongs to this session (registered before), Register updates its
// data, as Curator's registerService does, and returns a second
// Registration of the same node.
//
// The registration ends with the session: to stay registered across
// session expiry, register again on a new Session, or use KeepRegistered.
func (d *Discovery) Register(ctx context.Context, inst ServiceInstance) (*Registration, error) {
	if d.err != nil {
		return nil, d.err
	}
	inst, data, err := d.prepare(inst)
	if err != nil {
		return nil, errorf("register an instance of %q in %s: %w", inst.Name, d.base, err)
	}
	dir := d.base + "/" + inst.Name
	node := dir + "/" + inst.ID
	a := d.s.queued(ctx, "registration", dir)
	err = createEphemeral(ctx, d.s, node, data)
	if errors.Is(err, ErrMemberExists) {
		err = d.reregister(ctx, node, data, err)
	}
	if err != nil {
		a.abandoned(err)
		return nil, errorf("register %s: %w", node, err)
	}
	g := &Group{s: d.s, dir: dir, id: inst.ID, node: node, h: a.granted(d.s, node, 0, 0)}
	return &Registration{g: g, inst: inst}, nil
}

// reregister updates node, registered already, if it is this session's;
// otherwise it returns exists, the error that said it is there.
func (d *Discovery) reregister(ctx context.Context, node string, data []byte, exists error) error {
	rd, err := d.s.read(ctx, node, reading{op: readStat})
	st := rd.st
	switch {
	case errors.Is(err, zkclient.ErrNoNode):
		return exists // gone meanwhile: the caller may try again
	case err != nil:
		return err
	case st.EphemeralOwner != d.s.ID():
		return exists
	}
	_, err = d.s.setData(ctx, node, data, st.Version)
	if errors.Is(err, zkclient.ErrBadVersion) || errors.Is(err, zkclient.ErrNoNode) {
		return exists // changed or gone meanwhile: let the caller look again
	}
	return err
}

// prepare fills in inst's defaults and checks it.
func (d *Discovery) prepare(inst ServiceInstance) (ServiceInstance, []byte, error) {
	if inst.ID == "" {
		inst.ID = uuid.NewString()
	}
	if inst.RegistrationTime.IsZero() {
		inst.RegistrationTime = time.Now()
	}
	inst.RegistrationTime = inst.RegistrationTime.Truncate(time.Millisecond)
	if err := d.checkSegment("service name", inst.Name); err != nil {
		return inst, nil, err
	}
	if err := d.checkSegment("instance id", inst.ID); err != nil {
		return inst, nil, err
	}
	if inst.Type = cmpOr(inst.Type, "DYNAMIC"); inst.Type != "DYNAMIC" {
		return inst, nil, fmt.Errorf("%w: service type %q: only DYNAMIC instances (ephemeral nodes) can be registered", ErrInvalidArgument, inst.Type)
	}
	data, err := json.Marshal(inst)
	return inst, data, err
}

// Instance returns the instance as registered (or last updated).
func (r *Registration) Instance() ServiceInstance {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inst
}

// Update replaces the registered instance's data with inst, which must have
// the same Name and ID (an empty ID or zero RegistrationTime is the
// registered one's). Errors are those of Group.Update.
func (r *Registration) Update(ctx context.Context, inst ServiceInstance) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if inst.ID == "" {
		inst.ID = r.inst.ID
	}
	if inst.RegistrationTime.IsZero() {
		inst.RegistrationTime = r.inst.RegistrationTime
	}
	if inst.Name != r.inst.Name || inst.ID != r.inst.ID {
		return errorf("update %s: %w: instance %s/%s is another instance", r.g.node, ErrInvalidArgument, inst.Name, inst.ID)
	}
	d := Discovery{s: r.g.s}
	inst, data, err := d.prepare(inst)
	if err != nil {
		return errorf("update %s: %w", r.g.node, err)
	}
	if err := r.g.Update(ctx, data); err != nil {
		return err
	}
	r.inst = inst
	return nil
}

// Unregister deletes the instance's node, even if ctx is already cancelled
// (a node of that id made by another session is left alone). Errors are
// those of Group.Leave.
func (r *Registration) Unregister(ctx context.Context) error { return r.g.Leave(ctx) }

// Lost returns a channel that is closed when the registration is void:
// unregistered, the session expired or was closed, the node was deleted
// by someone else, or (in strict mode, see WithStrict) the session may
// have expired.
func (r *Registration) Lost() <-chan struct{} { return r.g.Lost() }

// Services returns the names of the services under the base path, sorted
// (Curator's queryForNames). One listing.
func (d *Discovery) Services(ctx context.Context) ([]string, error) {
	if d.err != nil {
		return nil, d.err
	}
	rd, err := d.s.read(ctx, d.base, reading{op: readChildren})
	kids := rd.kids
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, errorf("services in %s: %w", d.base, err)
	}
	slices.Sort(kids)
	return kids, nil
}

// Instances returns the instances of the service name, sorted by id
// (Curator's queryForInstances): one listing, then one read per instance.
// A node whose data is not an instance is left out, and logged.
func (d *Discovery) Instances(ctx context.Context, name string) ([]ServiceInstance, error) {
	if d.err != nil {
		return nil, d.err
	}
	if err := d.checkSegment("service name", name); err != nil {
		return nil, errorf("instances of %q in %s: %w", name, d.base, err)
	}
	ms, err := GroupMembers(ctx, d.s, d.base+"/"+name)
	if err != nil {
		return nil, err
	}
	return d.decode(name, ms), nil
}

// Instance returns the instance id of the service name, and false if there
// is none (Curator's queryForInstance). One read.
func (d *Discovery) Instance(ctx context.Context, name, id string) (ServiceInstance, bool, error) {
	if d.err != nil {
		return ServiceInstance{}, false, d.err
	}
	err := d.checkSegment("service name", name)
	if err == nil {
		err = d.checkSegment("instance id", id)
	}
	if err != nil {
		return ServiceInstance{}, false, errorf("instance %q of %q in %s: %w", id, name, d.base, err)
	}
	p := d.base + "/" + name + "/" + id
	rd, err := d.s.read(ctx, p, reading{op: readData})
	data := rd.data
	if errors.Is(err, zkclient.ErrNoNode) {
		return ServiceInstance{}, false, nil
	}
	if err != nil {
		return ServiceInstance{}, false, errorf("instance %s: %w", p, err)
	}
	var inst ServiceInstance
	if err := json.Unmarshal(data, &inst); err != nil {
		return ServiceInstance{}, false, errorf("instance %s: %w", p, err)
	}
	return inst, true, nil
}

// Watch follows the instances of the service name, sorted by id, as a
// [Stream]: its first Next returns the instances when the watch was set,
// and each later one the instances after a change, an instance registered,
// unregistered (also by its session ending) or updated, merged with the
// changes made before Next was called. A service that does not exist has
// no instances, and is followed until it is made. A node whose data is not
// an instance is left out, and logged.
//
// Watch reads the service before it returns (ctx bounds that read only);
// it returns an error for an invalid base path or name, or when that read
// fails. The stream costs one child watch on the service and one data
// watch per instance (see [WatchGroup]).
func (d *Discovery) Watch(ctx context.Context, name string) (*Stream[[]ServiceInstance], error) {
	what := fmt.Sprintf("watch service %q in %s", name, d.base)
	if d.err != nil {
		return nil, errorf("%s: %w", what, d.err)
	}
	if err := d.checkSegment("service name", name); err != nil {
		return nil, errorf("%s: %w", what, err)
	}
	decode := func(ms []Member) []ServiceInstance { return d.decode(name, ms) }
	return watchGroup(ctx, d.s, d.base+"/"+name, what, decode, sameInstances)
}

func sameInstances(a, b []ServiceInstance) bool {
	return slices.EqualFunc(a, b, func(a, b ServiceInstance) bool {
		return a.Name == b.Name && a.ID == b.ID && a.Address == b.Address &&
			a.Port == b.Port && a.SSLPort == b.SSLPort && bytes.Equal(a.Payload, b.Payload) &&
			a.RegistrationTime.Equal(b.RegistrationTime) && a.Type == b.Type &&
			a.URISpec == b.URISpec && a.Disabled == b.Disabled
	})
}

// decode turns a service's members into instances, leaving out (and
// logging) those whose data is not one.
func (d *Discovery) decode(name string, ms []Member) []ServiceInstance {
	out := make([]ServiceInstance, 0, len(ms))
	for _, m := range ms {
		var inst ServiceInstance
		if err := json.Unmarshal(m.Data, &inst); err != nil {
			d.s.log.Warn("zkrecipes: not a service instance; left out", "node", d.base+"/"+name+"/"+m.ID, "err", err)
			continue
		}
		out = append(out, inst)
	}
	return out
}

// KeepRegistered keeps inst registered under basePath until ctx ends,
// across session expiry: it registers inst on a session from newSession,
// and whenever that session ends it closes it and registers again on a new
// one. If the instance's node is deleted while the session lives, it
// registers again at once; if the id is held by another live session, it
// waits until that node is gone. The instance keeps its id and
// registration time throughout (filled in once if empty).
//
// The sessions newSession returns belong to KeepRegistered, which closes
// them; they should not be strict (see WithStrict): a registration that
// could be void is still registered. An error from newSession is retried
// after a pause (growing to 5 s); to log such errors, log them in
// newSession. When ctx ends, KeepRegistered unregisters, closes the
// session and returns nil; it returns early with an error only for an
// invalid base path or instance, or an error that registering again
// cannot cure (a node's ACL refusing the session, say).
func KeepRegistered(ctx context.Context, newSession func(context.Context) (*Session, error), basePath string, inst ServiceInstance) error {
	if err := checkPath(basePath); err != nil {
		return err
	}
	inst, _, err := (&Discovery{base: basePath}).prepare(inst)
	if err != nil {
		return errorf("keep registered in %s: %w", basePath, err)
	}
	node := basePath + "/" + inst.Name + "/" + inst.ID
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		s, err := newSession(ctx)
		if err != nil {
			select {
			case <-time.After(pause):
				pause = min(2*pause, 5*time.Second)
			case <-ctx.Done():
			}
			continue
		}
		pause = 100 * time.Millisecond
		err = keepOnSession(ctx, NewDiscovery(s, basePath), node, inst)
		s.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// keepOnSession keeps inst registered on d's session until ctx ends (then
// it unregisters) or the session is over; it returns nil then, or an error
// that registering again cannot cure.
func keepOnSession(ctx context.Context, d *Discovery, node string, inst ServiceInstance) error {
	s := d.s
	for {
		r, err := d.Register(ctx, inst)
		switch {
		case err == nil:
			select {
			case <-r.Lost():
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				r.Unregister(ctx)
				return nil
			}
			if s.Err() != nil {
				return nil
			}
			// Deleted by someone else, or void in strict mode while
			// still ours: register again once it is gone.
			err = s.awaitDeleted(ctx, node, readStat, nil)
		case errors.Is(err, ErrMemberExists):
			err = s.awaitDeleted(ctx, node, readStat, nil)
		}
		switch {
		case ctx.Err() != nil, s.Err() != nil:
			return nil
		case err != nil && !errors.Is(err, ErrConnectionLoss):
			return err
		}
	}
}
