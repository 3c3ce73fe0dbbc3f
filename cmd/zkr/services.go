package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

// registerFlags are zkr register's options.
type registerFlags struct {
	id, address, payload, uriSpec string
	port, sslPort                 int
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
	in := zkrecipes.ServiceInstance{Name: name, ID: f.id, Address: f.address, Port: f.port, SSLPort: f.sslPort, URISpec: f.uriSpec}
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

func (a *app) newServicesCmd() *cobra.Command {
	var watch, asJSON bool
	cmd := &cobra.Command{
		Use:   "services BASE [NAME]",
		Short: "List the services under a base path, or the instances of one",
		Long: `List the services registered under BASE in the layout of Apache Curator's
service discovery, one name per line; with NAME, list that service's
instances, one per line: id, address:port (and ssl:port), then the payload,
separated by tabs. --json prints the instances as Curator's JSON, in a list.

With --watch (and NAME), print the instances again, after a timestamp line,
whenever one registers, unregisters or changes, until interrupted.`,
		Example: `  zkr services /services
  zkr services /services api --watch`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return usagef("missing BASE")
			case len(args) > 2:
				return usagef("expected BASE [NAME], got %q", args)
			case watch && len(args) == 1:
				return usagef("--watch needs NAME")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.session(cmd, nil, func(ctx context.Context, s *zkrecipes.Session) error {
				return a.services(ctx, s, args, watch, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&watch, "watch", false, "print the instances again at every change, until interrupted")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: the names, or a list of instances (one list per line with --watch)")
	return cmd
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
		for _, in := range insts {
			where := in.Address
			if in.Port != 0 {
				where += ":" + strconv.Itoa(in.Port)
			}
			if in.SSLPort != 0 {
				where += " ssl:" + strconv.Itoa(in.SSLPort)
			}
			fmt.Fprintf(a.stdout, "%s\t%s\t%s\n", in.ID, where, in.Payload)
		}
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
