package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes/zkserver"
)

// serveFlags are zkr server's options.
type serveFlags struct {
	addr          string
	secureAddr    string
	tick          time.Duration
	maxConnsPerIP int
	ttl           bool
	dataDir       string
	requireSASL   bool
}

func (a *app) newServerCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the embedded ZooKeeper-compatible server (zkserver) for local work",
		Long: `Run zkrecipes' embedded ZooKeeper-compatible server until interrupted. It
speaks ZooKeeper's wire protocol to any client (Go, Java, Python) and behaves
like a standalone ZooKeeper 3.8 where clients can tell, as far as zkrecipes'
conformance suite checks. It is for tests, demos and work on one machine; a
ZooKeeper ensemble remains the answer for anything more.

By default it keeps everything in memory: the tree is gone when it stops.
With --data-dir it keeps a transaction log, synced before each reply, and
snapshots in that directory, so a restart keeps the tree, the zxid and the
sessions (which clients must reconnect to within their timeout). If the
log or a snapshot cannot be written, it stops (exit status 1) rather than
acknowledge a write it may lose.

With --tls-cert and --tls-key (the server's certificate and its key, PEM
files) it also serves TLS clients on --secure-addr, like ZooKeeper's
secureClientPort. With --tls-ca as well, clients must present a
certificate signed by a CA in that file (ZooKeeper's ssl.clientAuth=need),
and a session is then authenticated under the x509 scheme as the
certificate's subject ("CN=client,O=Example"), for ACLs such as
x509:CN=client,O=Example. Here these flags configure the server: their
$ZKR_TLS_ variables, which configure zkr's client side, do not apply.
--addr "" leaves out the plain port.

With --sasl-user and --sasl-password it accepts SASL DIGEST-MD5 logins of
that user, as ZooKeeper with a JAAS Server section listing it: the session is
then known as sasl:<user>, for ACLs such as sasl:bob. --require-sasl also
refuses every session that has not logged in (ZooKeeper's
sessionRequireClientSASLAuth). Here too the flags configure the server and
$ZKR_SASL_ variables do not apply.

The addresses it listens on are printed on standard output, one a line:
the plain port's, then the secure port's.`,
		Example: `  zkr server                       # 127.0.0.1:2181
  zkr server --addr 127.0.0.1:0    # a free port, printed
  zkr server --data-dir ./zkdata   # durable across restarts
  zkr server --tls-cert server.pem --tls-key server-key.pem --tls-ca ca.pem
  zkr server --sasl-user bob --sasl-password s3cret --require-sasl
  ZKR_SERVERS=127.0.0.1:2181 zkr lock /locks/x -- make`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:2181", "host:port to listen on (port 0: a free one); \"\" for none, with TLS")
	fl.StringVar(&f.secureAddr, "secure-addr", "127.0.0.1:2281", "host:port of the TLS client port, served with --tls-cert and --tls-key (port 0: a free one)")
	fl.DurationVar(&f.tick, "tick", 2*time.Second, "tickTime: session timeouts are negotiated into [2, 20] x tick")
	fl.IntVar(&f.maxConnsPerIP, "max-conns-per-ip", 0, "limit connections from one address (maxClientCnxns); 0: no limit")
	fl.BoolVar(&f.ttl, "ttl", false, "allow TTL nodes (zookeeper.extendedTypesEnabled)")
	fl.StringVar(&f.dataDir, "data-dir", "", "directory for the transaction log and snapshots (created if missing); empty: in memory")
	fl.BoolVar(&f.requireSASL, "require-sasl", false, "refuse sessions that have not logged in with SASL (sessionRequireClientSASLAuth); needs --sasl-user")
	return cmd
}

func (a *app) serve(f serveFlags) error {
	if f.tick <= 0 {
		return usagef("--tick %v: must be positive", f.tick)
	}
	if f.maxConnsPerIP < 0 {
		return usagef("--max-conns-per-ip %d: must not be negative", f.maxConnsPerIP)
	}
	tlsConfig, err := a.serverTLS()
	if err != nil {
		return err
	}
	if f.addr == "" && tlsConfig == nil {
		return usagef("--addr \"\": no port to listen on without --tls-cert and --tls-key")
	}
	users, err := a.serverSASL()
	if err != nil {
		return err
	}
	if f.requireSASL && users == nil {
		return usagef("--require-sasl needs --sasl-user and --sasl-password, the user who may log in")
	}
	srv := zkserver.NewServer(zkserver.Options{
		TickTime:          f.tick,
		MaxSessionTimeout: 20 * f.tick,
		MaxConnsPerIP:     f.maxConnsPerIP,
		TTLEnabled:        f.ttl,
		DataDir:           f.dataDir,
		TLS:               tlsConfig,
		SecureAddr:        f.secureAddr,
		SASLUsers:         users,
		RequireSASL:       f.requireSASL,
	})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	if err := srv.Start(f.addr); err != nil {
		return withCode(exitConnect, fmt.Errorf("start on %s: %w", strings.Trim(f.addr+" "+tlsAddr(tlsConfig, f.secureAddr), " "), err))
	}
	defer srv.Close()
	a.metrics.serving(srv)
	var listening []string
	for _, addr := range []string{srv.Addr(), srv.SecureAddr()} {
		if addr != "" {
			fmt.Fprintln(a.stdout, addr)
		}
	}
	if addr := srv.Addr(); addr != "" {
		listening = append(listening, addr)
	}
	if addr := srv.SecureAddr(); addr != "" {
		who := "any client"
		if tlsConfig.ClientCAs != nil {
			who = "clients with a certificate from --tls-ca, as x509:<subject>"
		}
		listening = append(listening, fmt.Sprintf("%s (TLS, %s)", addr, who))
	}
	where := "in memory"
	if f.dataDir != "" {
		where = "data in " + f.dataDir
	}
	for user := range users {
		where += "; SASL user " + user
		if f.requireSASL {
			where += ", required"
		}
	}
	fmt.Fprintf(a.stderr, "zkr server: zkserver listening on %s (%s; Ctrl-C stops it)\n", strings.Join(listening, " and "), where)
	select {
	case s := <-sig:
		fmt.Fprintf(a.stderr, "zkr server: %v: stopping\n", s)
		return nil
	case <-srv.Failed():
		return withCode(exitFailure, fmt.Errorf("stopped: %w", srv.Err()))
	}
}

func tlsAddr(cfg *tls.Config, addr string) string {
	if cfg == nil {
		return ""
	}
	return addr
}

// serverSASL returns the SASL user of --sasl-user and --sasl-password
// (the flags only: their environment variables are zkr's client settings),
// or nil without them.
func (a *app) serverSASL() (map[string]string, error) {
	switch {
	case a.saslUser == "" && a.saslPassword == "":
		return nil, nil
	case a.saslUser == "" || a.saslPassword == "":
		return nil, usagef("SASL needs --sasl-user and --sasl-password, the user who may log in and the password")
	}
	return map[string]string{a.saslUser: a.saslPassword}, nil
}

// serverTLS returns the server's TLS configuration from --tls-cert,
// --tls-key and --tls-ca (the flags only: their environment variables
// are zkr's client settings), or nil without --tls-cert.
func (a *app) serverTLS() (*tls.Config, error) {
	switch {
	case a.tlsCert == "" && a.tlsKey == "" && a.tlsCA == "":
		return nil, nil
	case a.tlsCert == "" || a.tlsKey == "":
		return nil, usagef("the TLS port needs --tls-cert and --tls-key, the server's certificate and its key (--tls-ca adds client certificates)")
	}
	read := func(flag, name string) ([]byte, error) {
		b, err := os.ReadFile(name)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, usagef("--%s %q: cannot read: %v", flag, name, err)
		}
		return b, nil
	}
	certPEM, err := read("tls-cert", a.tlsCert)
	if err != nil {
		return nil, err
	}
	keyPEM, err := read("tls-key", a.tlsKey)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, usagef("--tls-cert %q with --tls-key %q: %v", a.tlsCert, a.tlsKey, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if a.tlsCA != "" {
		caPEM, err := read("tls-ca", a.tlsCA)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = x509.NewCertPool()
		if !cfg.ClientCAs.AppendCertsFromPEM(caPEM) {
			return nil, usagef("--tls-ca %q: no PEM certificate in the file", a.tlsCA)
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
