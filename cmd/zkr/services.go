package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

// registerFlags are zkr register's options.
type registerFlags struct {
	id, address, payload, uriSpec string
	port, sslPort                 int
	disabled                      bool
}

func (a *app) newRegisterCmd() *cobra.Command {
	var f registerFlags
	cmd := &cobra.Command{
		Use:   "register BASE NAME [--id ID] [--address A] [--port N] [--payload JSON] [-- COMMAND [ARG...]]",
		Short: "Register a service instance while a command runs",
		Long: `Register an instance of the service NAME under the base path BASE, in the
layout of Apache Curator's service discovery (an ephemeral node BASE/NAME/ID
holding the instance as Curator's JSON), so that Java services using Curator's
ServiceDiscovery find it; then run COMMAND and unregister when it exits; zkr
exits with COMMAND's status. Without COMMAND, stay registered until
interrupted (SIGINT, SIGTERM), then unregister and exit with status 0.

Unlike join, losing the registration does not stop COMMAND: after the
session expires zkr registers the instance again on a new session (keeping
its id and registration time), and if another session holds the id, it
waits for that instance to go. COMMAND gets ZKR_PATH (BASE/NAME) and ZKR_ID.

--payload is a JSON value; text that is not JSON is sent as a JSON string.
--disabled registers the instance with Curator's "enabled": false: listed,
but never picked by a service provider (zkr services --pick shows it).

Exit status: COMMAND's own, or 2 bad input, 4 instance id held by another
session, 6 no connection to ZooKeeper, 126/127 COMMAND cannot be run / not
found.`,
		Example: `  zkr register /services api --id "$(hostname)" --address "$(hostname)" --port 8080 -- ./api
  zkr register /services api --port 8080 --payload '{"zone":"eu-1"}' --uri-spec '{scheme}://{address}:{port}'`,
		Args: baseNameAndCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.register(cmd, f, args[0], args[1], args[2:])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.id, "id", "", "instance id, one path segment (default: a random UUID)")
	fl.StringVar(&f.address, "address", "", "the instance's address (default: this host's name)")
	fl.IntVar(&f.port, "port", 0, "the instance's port (0: none)")
	fl.IntVar(&f.sslPort, "ssl-port", 0, "the instance's SSL port (0: none)")
	fl.StringVar(&f.payload, "payload", "", "the instance's payload: a JSON value, or text sent as a JSON string")
	fl.StringVar(&f.uriSpec, "uri-spec", "", `Curator's UriSpec, as "{scheme}://{address}:{port}"`)
	fl.BoolVar(&f.disabled, "disabled", false, `register the instance disabled (Curator's "enabled": false): providers do not pick it`)
	return cmd
}

// baseNameAndCommand checks the arguments "BASE NAME [-- COMMAND [ARG...]]".
func baseNameAndCommand(cmd *cobra.Command, args []string) error {
	dash := cmd.ArgsLenAtDash()
	before := args
	if dash >= 0 {
		before = args[:dash]
	}
	switch {
	case len(before) < 2:
		return usagef("expected BASE and NAME, got %q", before)
	case dash == -1 && len(args) > 2:
		return usagef("put -- between NAME and the command (got %q)", args[2:])
	case len(before) > 2:
		return usagef("expected BASE and NAME before --, got %d: %q", len(before), before)
	case dash >= 0 && len(args) == 2:
		return usagef("no command after --")
	}
	return nil
}

// instance builds the instance the flags describe.
func (f registerFlags) instance(name string) (zkrecipes.ServiceInstance, error) {
	in := zkrecipes.ServiceInstance{Name: name, ID: f.id, Address: f.address, Port: f.port, SSLPort: f.sslPort, URISpec: f.uriSpec, Disabled: f.disabled}
	for flag, p := range map[string]int{"--port": f.port, "--ssl-port": f.sslPort} {
		if p < 0 || p > 65535 {
			return in, usagef("%s %d: not a port", flag, p)
		}
	}
	if in.Address == "" {
		in.Address, _ = os.Hostname()
	}
	switch {
	case f.payload == "":
	case json.Valid([]byte(f.payload)):
		in.Payload = json.RawMessage(f.payload)
	default:
		in.Payload, _ = json.Marshal(f.payload) // a string: cannot fail
	}
	if _, err := json.Marshal(in); err != nil {
		return in, withCode(exitUsage, err)
	}
	return in, nil
}

func (a *app) register(cmd *cobra.Command, f registerFlags, base, name string, argv []string) error {
	inst, err := f.instance(name)
	if err != nil {
		return err
	}
	sigs := catchSignals()
	defer sigs.release()
	ctx := cmd.Context()
	s, err := a.connectOrSignal(ctx, sigs, false)
	if err != nil {
		return err
	}
	a.metrics.waiting("registering in " + base)
	var r *zkrecipes.Registration
	sig, err := waitFor(ctx, sigs, func(ctx context.Context) error {
		var err error
		r, err = zkrecipes.NewDiscovery(s, base).Register(ctx, inst)
		return err
	})
	if errors.Is(err, zkrecipes.ErrMemberExists) {
		err = codef(exitHeld, "instance id %q of %s is held by another session", inst.ID, name)
	}
	if err := waitError(sig, err, "registering in "+base); err != nil {
		closeSession(s)
		return err
	}
	inst = r.Instance()
	a.metrics.readyUntil(nil, "")
	a.logf(cmd, "registered %s/%s/%s", base, name, inst.ID)

	// From now on KeepRegistered owns the session, and the ones after it.
	first := true
	newSession := func(ctx context.Context) (*zkrecipes.Session, error) {
		if first {
			first = false
			return s, nil
		}
		s, err := a.connect(ctx, false)
		if err == nil {
			a.logf(cmd, "registering %s again on a new session", inst.ID)
		} else if ctx.Err() == nil {
			a.logf(cmd, "reconnecting to register again: %v", err)
		}
		return s, err
	}
	kctx, stop := context.WithCancel(context.Background())
	kept := make(chan struct{})
	var keptErr error
	go func() {
		defer close(kept)
		keptErr = zkrecipes.KeepRegistered(kctx, newSession, base, inst)
	}()
	defer func() {
		stop()
		select {
		case <-kept:
			if keptErr != nil {
				a.logf(cmd, "keeping %s registered: %v", inst.ID, keptErr)
			}
		case <-time.After(releaseWait + closeWait):
			a.logf(cmd, "unregistering: no answer in time; the instance goes with the session")
		}
	}()

	return a.runHeld(cmd, s, holding{
		what: fmt.Sprintf("registration %q of %s", inst.ID, name),
		env:  append(holderEnv(base+"/"+name, 0), "ZKR_ID="+inst.ID),
		idle: fmt.Sprintf("instance %q of %s registered in %s", inst.ID, name, base),
		end:  kept,
		ended: func() error {
			if keptErr == nil {
				return nil
			}
			return recipeError("keeping "+inst.ID+" registered", keptErr)
		},
	}, sigs, argv)
}

// servicesFlags are zkr services' options.
type servicesFlags struct {
	watch, asJSON bool
	pick          int
	strategy      string
}

func (a *app) newServicesCmd() *cobra.Command {
	var f servicesFlags
	cmd := &cobra.Command{
		Use:   "services BASE [NAME]",
		Short: "List the services under a base path, or the instances of one",
		Long: `List the services registered under BASE in the layout of Apache Curator's
service discovery, one name per line; with NAME, list that service's
instances, one per line: id, address:port (and ssl:port), the payload, then
"enabled" or "disabled" (Curator's enabled flag), separated by tabs. --json
prints the instances as Curator's JSON, in a list.

With --watch (and NAME), print the instances again, after a timestamp line,
whenever one registers, unregisters or changes, until interrupted.

With --pick N (and NAME), show what a service provider (zkrecipes' Provider,
Curator's ServiceProvider) would pick: after the instances, a line saying
which are usable (enabled) and which are not and why, then N picks made with
--strategy, one per line: id and address:port. round-robin takes the usable
instances in turn (by id), random (the default, as Curator's) at random,
sticky keeps the first, picked at random, while it is usable. With --json,
print one object: the strategy, the usable ids and the picked ids. With no
usable instance, zkr exits with status 1.`,
		Example: `  zkr services /services
  zkr services /services api --watch
  zkr services /services api --pick 4 --strategy round-robin`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return usagef("missing BASE")
			case len(args) > 2:
				return usagef("expected BASE [NAME], got %q", args)
			case f.watch && len(args) == 1:
				return usagef("--watch needs NAME")
			case f.pick < 0:
				return usagef("--pick %d: must not be negative", f.pick)
			case f.pick > 0 && len(args) == 1:
				return usagef("--pick needs NAME")
			case f.pick > 0 && f.watch:
				return usagef("--pick and --watch exclude each other")
			case cmd.Flags().Changed("strategy") && f.pick == 0:
				return usagef("--strategy needs --pick")
			}
			if _, err := strategy(f.strategy); err != nil {
				return err
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.session(cmd, nil, func(ctx context.Context, s *zkrecipes.Session) error {
				if f.pick > 0 {
					return a.pick(ctx, s, args[0], args[1], f)
				}
				return a.services(ctx, s, args, f.watch, f.asJSON)
			})
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.watch, "watch", false, "print the instances again at every change, until interrupted")
	fl.BoolVar(&f.asJSON, "json", false, "print JSON: the names, or a list of instances (one list per line with --watch), or the picks")
	fl.IntVar(&f.pick, "pick", 0, "show N picks of a service provider among the instances of NAME")
	fl.StringVar(&f.strategy, "strategy", "random", "the provider's strategy for --pick: round-robin, random or sticky")
	return cmd
}

// strategy returns the provider strategy called name.
func strategy(name string) (zkrecipes.Strategy, error) {
	switch name {
	case "round-robin":
		return zkrecipes.RoundRobin(), nil
	case "random":
		return zkrecipes.Random(), nil
	case "sticky":
		return zkrecipes.Sticky(zkrecipes.Random()), nil
	}
	return nil, usagef("--strategy %q: want round-robin, random or sticky", name)
}

// showInstances prints insts one a line, as zkr services lists them.
func (a *app) showInstances(insts []zkrecipes.ServiceInstance) {
	for _, in := range insts {
		state := "enabled"
		if in.Disabled {
			state = "disabled"
		}
		fmt.Fprintf(a.stdout, "%s\t%s\t%s\t%s\n", in.ID, endpoint(in), in.Payload, state)
	}
}

// endpoint is the address and ports of in, for listing.
func endpoint(in zkrecipes.ServiceInstance) string {
	w := in.Address
	if in.Port != 0 {
		w += ":" + strconv.Itoa(in.Port)
	}
	if in.SSLPort != 0 {
		w += " ssl:" + strconv.Itoa(in.SSLPort)
	}
	return w
}

// pick shows what a Provider of name in base, with f's strategy, picks f.pick
// times, and why.
func (a *app) pick(ctx context.Context, s *zkrecipes.Session, base, name string, f servicesFlags) error {
	st, err := strategy(f.strategy)
	if err != nil {
		return err
	}
	p, err := zkrecipes.NewDiscovery(s, base).Provider(ctx, name, zkrecipes.WithStrategy(st))
	if err != nil {
		return recipeError("instances of "+name, err)
	}
	defer p.Close()
	all, usable := p.Cache().Instances(), p.Instances()
	var ids, not []string
	for _, in := range usable {
		ids = append(ids, in.ID)
	}
	for _, in := range all {
		if !slices.Contains(ids, in.ID) {
			why := "down"
			if in.Disabled {
				why = "disabled"
			}
			not = append(not, in.ID+" "+why)
		}
	}
	var picks []zkrecipes.ServiceInstance
	if len(usable) > 0 {
		for range f.pick {
			in, err := p.Instance()
			if err != nil {
				return recipeError("picking an instance of "+name, err)
			}
			picks = append(picks, in)
		}
	}
	if f.asJSON {
		out := struct {
			Strategy string   `json:"strategy"`
			Usable   []string `json:"usable"`
			Picks    []string `json:"picks"`
		}{f.strategy, append([]string{}, ids...), []string{}}
		for _, in := range picks {
			out.Picks = append(out.Picks, in.ID)
		}
		b, _ := json.Marshal(out) // strings: cannot fail
		fmt.Fprintf(a.stdout, "%s\n", b)
	} else {
		a.showInstances(all)
		why := ""
		if len(not) > 0 {
			why = "; not usable: " + strings.Join(not, ", ")
		}
		fmt.Fprintf(a.stdout, "%s picks among %d usable of %d instances%s\n", f.strategy, len(usable), len(all), why)
		for _, in := range picks {
			fmt.Fprintf(a.stdout, "%s\t%s\n", in.ID, endpoint(in))
		}
	}
	if len(usable) == 0 {
		_, err := p.Instance()
		return recipeError("picking an instance of "+name, err)
	}
	return nil
}

// services prints the services under args[0], or the instances of
// args[1]; with watch, again at every change, until ctx is cancelled.
func (a *app) services(ctx context.Context, s *zkrecipes.Session, args []string, watch, asJSON bool) error {
	base := args[0]
	d := zkrecipes.NewDiscovery(s, base)
	if len(args) == 1 {
		names, err := d.Services(ctx)
		if err != nil {
			return recipeError("services in "+base, err)
		}
		if asJSON {
			b, _ := json.Marshal(append([]string{}, names...)) // strings: cannot fail
			fmt.Fprintf(a.stdout, "%s\n", b)
			return nil
		}
		for _, n := range names {
			fmt.Fprintln(a.stdout, n)
		}
		return nil
	}
	name := args[1]
	show := func(insts []zkrecipes.ServiceInstance) {
		switch {
		case asJSON:
			b, _ := json.Marshal(append([]zkrecipes.ServiceInstance{}, insts...)) // read from JSON: cannot fail
			fmt.Fprintf(a.stdout, "%s\n", b)
			return
		case watch:
			fmt.Fprintf(a.stdout, "%s %d instances\n", time.Now().Format(time.RFC3339), len(insts))
		}
		a.showInstances(insts)
	}
	// One read first, to report a bad path or an unreadable service.
	insts, err := d.Instances(ctx, name)
	if err != nil {
		return recipeError("instances of "+name, err)
	}
	show(insts)
	if !watch {
		return nil
	}
	w, err := d.Watch(ctx, name)
	if err != nil {
		return recipeError("watching instances of "+name, err)
	}
	defer w.Close()
	last, _ := json.Marshal(insts)
	for {
		insts, err := w.Next(ctx)
		if err != nil {
			return recipeError("watching instances of "+name, err)
		}
		if cur, _ := json.Marshal(insts); string(cur) != string(last) {
			show(insts)
			last = cur
		}
	}
}
