package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/zkpath"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// defaultServers is used when neither --servers nor $ZKR_SERVERS is set.
const defaultServers = "127.0.0.1:2181"

// app is one run of zkr: its standard streams, its environment and the
// flags every command shares.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	servers        string
	tlsCA          string
	tlsCert        string
	tlsKey         string
	auth           string
	saslUser       string
	saslPassword   string
	krbPrincipal   string
	krbKeytab      string
	krbPassword    string
	krbConfig      string
	krbServiceHost string
	sessionTimeout time.Duration
	connectTimeout time.Duration
	verbose        bool

	// metrics is what --metrics-addr serves, while a command that has
	// the flag runs with it; nil otherwise.
	metrics *metricsServer
}

// run executes the command line args and returns zkr's exit status.
func (a *app) run(ctx context.Context, args []string) int {
	root := a.newRootCmd()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return report(a.stderr, cmd, err)
}

func (a *app) newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "zkr",
		Short: "Run commands under ZooKeeper locks and elections, and watch the recipes work",
		Long: `zkr runs commands under ZooKeeper coordination recipes: under a lock, only while
leader, or as a member of a group. It shows the queue behind a lock or an
election, and measures the herd effect that the recipes avoid.

ZooKeeper servers come from --servers, else $ZKR_SERVERS, else ` + defaultServers + `.
A chroot suffix ("zk1:2181,zk2:2181/app") makes every PATH relative to /app.
--tls-ca connects over TLS (ZooKeeper's secureClientPort), trusting that CA;
--tls-cert and --tls-key, given together, present a client certificate. --auth
user:password authenticates with the digest scheme; --sasl-user with
--sasl-password logs in with SASL DIGEST-MD5 (a user of the server's JAAS
Server section); --kerberos-principal logs in with SASL GSSAPI (Kerberos),
from --kerberos-keytab, --kerberos-password or kinit's credentials cache, with
--krb5-config. Each has an environment equivalent ($ZKR_TLS_CA,
$ZKR_TLS_CERT, $ZKR_TLS_KEY, $ZKR_AUTH, $ZKR_SASL_USER, $ZKR_SASL_PASSWORD,
$ZKR_KERBEROS_PRINCIPAL, $ZKR_KERBEROS_KEYTAB, $ZKR_KERBEROS_PASSWORD,
$KRB5_CONFIG); a flag wins over its variable. They do not apply where zkr starts its own server
(demo without --servers); demo and bench refuse TLS and credentials on servers
given to them.

The command that lock, elect and join run gets ZKR_FENCING_TOKEN (the holder's
fencing token, a decimal number that strictly increases from one holder to the
next) and ZKR_PATH; under elect and join also ZKR_ID. Signals sent to zkr (INT,
TERM, HUP, QUIT, USR1, USR2) are forwarded to it. When zkr's standard input is
not a terminal, the command runs in a process group of its own and signals go
to that whole group; on a terminal it stays in the terminal's group, which
delivers Ctrl-C to it directly. On Linux the command's process is killed if zkr
itself dies (processes the command started are not), since the lock would then
be released when the server expires zkr's session. The session is strict: the
holding counts as lost as soon as the connection to ZooKeeper has been down
for half the session timeout, before the server could have expired the
session and granted the lock to someone else.

` + exitCodesHelp,
		Example: `  zkr demo
  zkr lock /locks/backup -- ./backup.sh
  zkr elect /services/mailer --id "$(hostname)" -- ./mailer
  zkr inspect /locks/backup`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetIn(a.stdin)
	// cobra's completion command stays on: zkr completion bash|zsh|fish|powershell.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usagef("%w", err) })

	f := root.PersistentFlags()
	f.StringVar(&a.servers, "servers", "", "ZooKeeper servers, comma-separated host:port, optionally ending in a chroot (h1:2181,h2:2181/app) to which every PATH is relative (default $ZKR_SERVERS, else "+defaultServers+")")
	f.StringVar(&a.tlsCA, "tls-ca", "", "connect over TLS (ZooKeeper's secureClientPort), trusting the CA certificates in this PEM file (default $ZKR_TLS_CA)")
	f.StringVar(&a.tlsCert, "tls-cert", "", "connect over TLS presenting the client certificate in this PEM file; needs --tls-key (default $ZKR_TLS_CERT)")
	f.StringVar(&a.tlsKey, "tls-key", "", "the private key of --tls-cert, an unencrypted PEM file (default $ZKR_TLS_KEY)")
	f.StringVar(&a.auth, "auth", "", "authenticate with ZooKeeper's digest scheme as user:password (default $ZKR_AUTH, which keeps the password out of the process list)")
	f.StringVar(&a.saslUser, "sasl-user", "", "log in with SASL DIGEST-MD5 as this user of the server's JAAS configuration, known then as sasl:<user>; needs --sasl-password (default $ZKR_SASL_USER)")
	f.StringVar(&a.saslPassword, "sasl-password", "", "the password of --sasl-user (default $ZKR_SASL_PASSWORD, which keeps it out of the process list)")
	f.StringVar(&a.krbPrincipal, "kerberos-principal", "", "log in with SASL GSSAPI (Kerberos) as this principal, user or user@REALM, known then as sasl:user@REALM; credentials from --kerberos-keytab, else --kerberos-password, else kinit's cache ($KRB5CCNAME) (default $ZKR_KERBEROS_PRINCIPAL)")
	f.StringVar(&a.krbKeytab, "kerberos-keytab", "", "keytab file of --kerberos-principal (default $ZKR_KERBEROS_KEYTAB)")
	f.StringVar(&a.krbPassword, "kerberos-password", "", "password of --kerberos-principal (default $ZKR_KERBEROS_PASSWORD, which keeps it out of the process list)")
	f.StringVar(&a.krbConfig, "krb5-config", "", "Kerberos configuration: realms, KDCs (default $KRB5_CONFIG, else /etc/krb5.conf)")
	f.StringVar(&a.krbServiceHost, "kerberos-service-host", "", "host of the servers' principal zookeeper/HOST (default each server's host; an IP address is looked up) (default $ZKR_KERBEROS_SERVICE_HOST)")
	f.DurationVar(&a.sessionTimeout, "session-timeout", 10*time.Second, "ZooKeeper session timeout to ask for; a holder whose connection is down for half of it counts as lost")
	f.DurationVar(&a.connectTimeout, "connect-timeout", 10*time.Second, "give up connecting to ZooKeeper after this long (exit status 6)")
	f.BoolVarP(&a.verbose, "verbose", "v", false, "log the session's life (connected, suspended, expired) and each step on stderr")

	root.AddCommand(
		a.withMetrics(a.newLockCmd(), true, "once the lock is held, until it is lost"),
		a.withMetrics(a.newElectCmd(), true, "once leading (with --observe: once observing), until the leadership is lost"),
		a.newMembersCmd(),
		a.withMetrics(a.newJoinCmd(), true, "once a member, until the membership is lost"),
		a.withMetrics(a.newRegisterCmd(), true, "once registered"),
		a.newServicesCmd(),
		a.newInspectCmd(),
		a.withMetrics(a.newWatchCmd(), true, "once the tree under PATH has been read (after \"initialized\")"),
		a.newDemoCmd(),
		a.newBenchCmd(),
		a.withMetrics(a.newServerCmd(), false, "once the server listens"),
		a.newLsCmd(),
		a.newGetCmd(),
		a.newStatCmd(),
		a.newSetCmd(),
		a.newCreateCmd(),
		a.newRmCmd(),
		a.newACLCmd(),
		a.newWhoAmICmd(),
		a.newSyncCmd(),
		a.newCountCmd(),
		a.newConfigCmd(),
		a.newReconfigCmd(),
		a.newEphemeralsCmd(),
		a.newExportCmd(),
		a.newImportCmd(),
		a.newDiffCmd(),
		a.newConsoleCmd(),
		a.newVersionCmd(),
	)
	// --version by hand: cobra's Version field prints through a text
	// template, whose reflection keeps every method in the binary.
	var showVersion bool
	root.Flags().BoolVar(&showVersion, "version", false, "print zkr's version and source revision, as zkr version does")
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if showVersion {
			fmt.Fprint(a.stdout, versionText())
			return nil
		}
		return cmd.Help()
	}
	return root
}

// serverList returns the server addresses to use, the chroot ending the
// list ("" if none: "/app" in "h1:2181,h2:2181/app") and whether the user
// chose them (by flag or environment).
func (a *app) serverList() (servers []string, chroot string, chosen bool, err error) {
	spec, chosen := a.servers, true
	if spec == "" {
		spec = a.getenv("ZKR_SERVERS")
	}
	if spec == "" {
		spec, chosen = defaultServers, false
	}
	list := spec
	if i := strings.IndexByte(spec, '/'); i >= 0 {
		list, chroot = spec[:i], spec[i:]
		if err := zkpath.Check(chroot); err != nil {
			return nil, "", false, usagef("--servers %q: chroot %q: %v", spec, chroot, err)
		}
		if chroot == "/" {
			chroot = ""
		}
	}
	for s := range strings.SplitSeq(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, "", false, usagef("--servers %q: empty address", spec)
		}
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			// A bare host: ZooKeeper's default client port.
			host, port = s, "2181"
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
			return nil, "", false, usagef("--servers %q: %q is not host:port", spec, s)
		}
		servers = append(servers, net.JoinHostPort(host, port))
	}
	return servers, chroot, chosen, nil
}

// setting is the value of a global option and where it came from: the flag
// ("--tls-ca"), else its environment variable ("$ZKR_TLS_CA"), for messages.
type setting struct{ value, from string }

func (a *app) setting(flag, value, env string) setting {
	if value != "" {
		return setting{value, "--" + flag}
	}
	if v := a.getenv(env); v != "" {
		return setting{v, "$" + env}
	}
	return setting{}
}

// tlsConfig returns the TLS configuration of --tls-ca, --tls-cert and
// --tls-key (or their variables), or nil for a plain connection. A CA alone
// authenticates the server; a certificate and its key, which go together,
// authenticate zkr to the server as well (without --tls-ca, the server is
// checked against the system's CAs).
func (a *app) tlsConfig() (*tls.Config, error) {
	ca := a.setting("tls-ca", a.tlsCA, "ZKR_TLS_CA")
	cert := a.setting("tls-cert", a.tlsCert, "ZKR_TLS_CERT")
	key := a.setting("tls-key", a.tlsKey, "ZKR_TLS_KEY")
	switch {
	case cert.value != "" && key.value == "":
		return nil, usagef("%s given without --tls-key ($ZKR_TLS_KEY): a client certificate needs its private key", cert.from)
	case key.value != "" && cert.value == "":
		return nil, usagef("%s given without --tls-cert ($ZKR_TLS_CERT): a private key needs its client certificate", key.from)
	case ca.value == "" && cert.value == "":
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca.value != "" {
		b, err := readSetting(ca)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return nil, usagef("%s %q: no PEM certificate in the file", ca.from, ca.value)
		}
	}
	if cert.value != "" {
		certPEM, err := readSetting(cert)
		if err != nil {
			return nil, err
		}
		keyPEM, err := readSetting(key)
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, usagef("%s %q with %s %q: %v", cert.from, cert.value, key.from, key.value, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// readSetting reads the file a setting names; failing is bad input.
func readSetting(s setting) ([]byte, error) {
	b, err := os.ReadFile(s.value)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, usagef("%s %q: cannot read: %v", s.from, s.value, err)
	}
	return b, nil
}

// digestAuth returns the user and password of --auth (or $ZKR_AUTH), if
// set. The value is never repeated in a message: it holds a password.
func (a *app) digestAuth() (user, password string, ok bool, err error) {
	s := a.setting("auth", a.auth, "ZKR_AUTH")
	if s.value == "" {
		return "", "", false, nil
	}
	user, password, ok = strings.Cut(s.value, ":")
	switch {
	case !ok:
		return "", "", false, usagef("%s: expected user:password (digest scheme), found no colon", s.from)
	case user == "":
		return "", "", false, usagef("%s: expected user:password (digest scheme), the user is empty", s.from)
	}
	return user, password, true, nil
}

// saslAuth returns the user and password of --sasl-user and
// --sasl-password (or their variables), if set; one without the other is
// bad input. The password is never repeated in a message.
func (a *app) saslAuth() (user, password string, ok bool, err error) {
	u := a.setting("sasl-user", a.saslUser, "ZKR_SASL_USER")
	p := a.setting("sasl-password", a.saslPassword, "ZKR_SASL_PASSWORD")
	switch {
	case u.value == "" && p.value == "":
		return "", "", false, nil
	case p.value == "":
		return "", "", false, usagef("%s given without --sasl-password ($ZKR_SASL_PASSWORD)", u.from)
	case u.value == "":
		return "", "", false, usagef("%s given without --sasl-user ($ZKR_SASL_USER)", p.from)
	}
	return u.value, p.value, true, nil
}

// security returns the session options of the TLS and authentication
// settings, and whether there are any.
func (a *app) security() (opts []zkrecipes.SessionOption, secured bool, err error) {
	cfg, err := a.tlsConfig()
	if err != nil {
		return nil, false, err
	}
	if cfg != nil {
		opts = append(opts, zkrecipes.WithClientOptions(zkclient.WithTLS(cfg)))
	}
	user, password, ok, err := a.digestAuth()
	if err != nil {
		return nil, false, err
	}
	if ok {
		opts = append(opts, zkrecipes.WithClientOptions(zkclient.WithDigestAuth(user, password)))
	}
	user, password, ok, err = a.saslAuth()
	if err != nil {
		return nil, false, err
	}
	if ok && a.setting("kerberos-principal", a.krbPrincipal, "ZKR_KERBEROS_PRINCIPAL").value != "" {
		return nil, false, usagef("--sasl-user and --kerberos-principal (or their variables): a session logs in with one SASL mechanism")
	}
	krb, err := a.kerberosMechanism()
	if err != nil {
		return nil, false, err
	}
	switch {
	case ok:
		opts = append(opts, zkrecipes.WithClientOptions(zkclient.WithSASL(zkclient.DigestMD5(user, password))))
	case krb != nil:
		opts = append(opts, zkrecipes.WithClientOptions(zkclient.WithSASL(krb)))
	}
	return opts, len(opts) > 0, nil
}

// checkTimeouts refuses durations that cannot work.
func (a *app) checkTimeouts() error {
	if a.sessionTimeout <= 0 {
		return usagef("--session-timeout %v: must be positive", a.sessionTimeout)
	}
	if a.connectTimeout <= 0 {
		return usagef("--connect-timeout %v: must be positive", a.connectTimeout)
	}
	return nil
}

// logger returns the logger for the session's life: stderr with -v,
// nothing otherwise.
func (a *app) logger() *slog.Logger {
	if !a.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// logf prints a progress line on stderr with -v.
func (a *app) logf(cmd *cobra.Command, format string, args ...any) {
	if a.verbose {
		fmt.Fprintf(a.stderr, cmd.CommandPath()+": "+format+"\n", args...)
	}
}

// connect opens a session. strict sessions report holdings lost as soon as
// the connection has been down for half the session timeout.
func (a *app) connect(ctx context.Context, strict bool) (*zkrecipes.Session, error) {
	servers, chroot, _, err := a.serverList()
	if err != nil {
		return nil, err
	}
	if err := a.checkTimeouts(); err != nil {
		return nil, err
	}
	sec, _, err := a.security()
	if err != nil {
		return nil, err
	}
	opts := append([]zkrecipes.SessionOption{
		zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(a.sessionTimeout)),
		zkrecipes.WithLogger(a.logger()),
	}, sec...)
	opts = append(opts, a.metrics.sessionOptions()...)
	if chroot != "" {
		opts = append(opts, zkrecipes.WithClientOptions(zkclient.WithChroot(chroot)))
	}
	if strict {
		opts = append(opts, zkrecipes.WithStrict())
	}
	cctx, cancel := context.WithTimeout(ctx, a.connectTimeout)
	defer cancel()
	s, err := zkrecipes.NewSession(cctx, servers, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, a.connectError(strings.Join(servers, ","), err)
	}
	if chroot != "" {
		// ZooKeeper answers "no node" for every path under a chroot that
		// does not exist; say what is missing instead.
		_, ok, err := s.Client().Exists(cctx, "/")
		switch {
		case err != nil && ctx.Err() != nil:
			closeSession(s)
			return nil, ctx.Err()
		case err != nil:
			closeSession(s)
			return nil, withCode(exitFailure, fmt.Errorf("checking the chroot %s: %w", chroot, err))
		case !ok:
			closeSession(s)
			return nil, codef(exitFailure, "the chroot %s of the server list does not exist on ZooKeeper at %s: create it first; every PATH is relative to it", chroot, strings.Join(servers, ","))
		}
	}
	a.metrics.connected(s)
	return s, nil
}

// connectError gives a failure of NewSession its exit status and message:
// refused credentials are a ZooKeeper error (exit status 1: trying again
// will not help), anything else is a failure to connect (6), with the last
// server's reason, such as a failed TLS handshake.
func (a *app) connectError(servers string, err error) error {
	if errors.Is(err, zkclient.ErrAuthFailed) {
		return withCode(exitFailure, fmt.Errorf("ZooKeeper at %s refused the credentials (see --auth, --sasl-user, --kerberos-principal, --tls-cert): %w", servers, err))
	}
	hint := "is it running? see --servers; a secure client port needs --tls-ca"
	if cfg, _ := a.tlsConfig(); cfg != nil {
		hint = "is it running, with TLS on this port? see --servers, --tls-ca, --tls-cert"
	}
	if cause := lastServerError(err); cause != "" {
		hint = cause + "; " + hint
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return codef(exitConnect, "cannot connect to ZooKeeper at %s within %v (%s)", servers, a.connectTimeout, hint)
	}
	return withCode(exitConnect, fmt.Errorf("cannot connect to ZooKeeper at %s: %w (%s)", servers, err, hint))
}

// lastServerError returns the newest of the per-server reasons that a
// failed connect joins, "" if there are none.
func lastServerError(err error) string {
	var last string
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range e.Unwrap() {
				_, multi := e.(interface{ Unwrap() []error })
				switch {
				case multi:
					walk(e)
				case errors.Is(e, zkclient.ErrNoServer), errors.Is(e, context.DeadlineExceeded), errors.Is(e, context.Canceled):
				default:
					last = e.Error()
				}
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return last
}

// pathAndCommand checks the arguments "PATH -- COMMAND [ARG...]"; with
// optional, the command may be left out ("PATH" alone).
func pathAndCommand(optional bool) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		dash := cmd.ArgsLenAtDash()
		switch {
		case len(args) == 0 || dash == 0:
			return usagef("missing PATH")
		case dash == -1 && len(args) == 1 && optional:
			return nil
		case dash == -1 && len(args) == 1:
			return usagef("missing -- COMMAND after PATH")
		case dash == -1:
			return usagef("put -- between PATH and the command (got %q)", args[1:])
		case dash > 1:
			return usagef("expected one PATH before --, got %d: %q", dash, args[:dash])
		case len(args) == 1:
			return usagef("no command after --")
		}
		return nil
	}
}

// onePath checks the arguments "PATH".
func onePath(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return usagef("missing PATH")
	case len(args) > 1:
		return usagef("expected one PATH, got %d: %q", len(args), args)
	}
	return nil
}

// noArgs refuses positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected arguments %q", args)
	}
	return nil
}

// recipeError gives an error from a recipe its exit status: a bad path or
// argument is bad input, reported as the recipe words it; anything else is a
// failure while doing what, a node's ACL refusing the session's credentials
// among them.
func recipeError(what string, err error) error {
	var e *exitError
	switch {
	case errors.As(err, &e):
		return err
	case errors.Is(err, zkrecipes.ErrInvalidPath), errors.Is(err, zkrecipes.ErrInvalidArgument):
		return withCode(exitUsage, err)
	case errors.Is(err, zkclient.ErrNoAuth):
		return withCode(exitFailure, fmt.Errorf("%s: %w (the node's ACL refuses this session's credentials; see --auth, --sasl-user, --kerberos-principal, --tls-cert)", what, err))
	}
	return withCode(exitFailure, fmt.Errorf("%s: %w", what, err))
}
