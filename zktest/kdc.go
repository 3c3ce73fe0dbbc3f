package zktest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// KDCRealm is the realm of the KDCs StartKDC runs.
const KDCRealm = "ZKTEST.LOCAL"

// kdcHint tells a reader how to get a KDC.
const kdcHint = "install MIT Kerberos with `apt-get install -y --no-install-recommends krb5-kdc krb5-admin-server`"

// KDC is an MIT Kerberos KDC for tests (Debian's krb5-kdc), serving the
// realm KDCRealm over TCP on a free port of 127.0.0.1, with its database,
// keytabs and configuration in a temporary directory. Its methods are safe
// for concurrent use.
type KDC struct {
	dir  string
	conf string // krb5.conf for clients
	env  []string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	log  string

	mu     sync.Mutex // serializes kadmin.local on the database
	closed bool
}

// kdcTools finds the MIT Kerberos programs; they live in /usr/sbin, which a
// user's PATH may lack.
func kdcTools() (map[string]string, error) {
	tools := map[string]string{}
	for _, name := range []string{"krb5kdc", "kdb5_util", "kadmin.local"} {
		p, err := exec.LookPath(name)
		if err != nil {
			p = filepath.Join("/usr/sbin", name)
			if _, serr := os.Stat(p); serr != nil {
				return nil, &unavailableError{fmt.Sprintf("%s not found; %s", name, kdcHint)}
			}
		}
		tools[name] = p
	}
	return tools, nil
}

// KDCAvailable reports whether StartKDC can run a KDC: nil when MIT
// Kerberos's krb5kdc, kdb5_util and kadmin.local are found, else an error
// saying how to install them (which SkipOrFail turns into a skip outside
// CI).
func KDCAvailable() error {
	_, err := kdcTools()
	return err
}

// StartKDC creates a realm's database and starts its KDC, returning once
// the KDC accepts connections. It takes about 25ms. Close stops it and
// removes its directory.
func StartKDC(ctx context.Context) (k *KDC, err error) {
	tools, err := kdcTools()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "zktest-kdc-")
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	k = &KDC{dir: dir, conf: filepath.Join(dir, "krb5.conf"), log: filepath.Join(dir, "kdc.log")}
	defer func() {
		if err != nil {
			k.Close()
			k = nil
		}
	}()
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	k.addr = "127.0.0.1:" + strconv.Itoa(ports[0])
	// Clients talk TCP only (udp_preference_limit = 1), to the KDC's one
	// port; nothing is looked up in DNS.
	client := fmt.Sprintf(`[libdefaults]
  default_realm = %[1]s
  dns_lookup_kdc = false
  dns_lookup_realm = false
  dns_canonicalize_hostname = false
  rdns = false
  udp_preference_limit = 1
  default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
  default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
  permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
[realms]
  %[1]s = {
    kdc = %[2]s
  }
[domain_realm]
  localhost = %[1]s
  127.0.0.1 = %[1]s
`, KDCRealm, k.addr)
	kdc := fmt.Sprintf(`[kdcdefaults]
  kdc_listen = %[2]s
  kdc_tcp_listen = %[2]s
[realms]
  %[1]s = {
    database_name = %[3]s
    key_stash_file = %[4]s
    acl_file = %[5]s
    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    max_life = 1h
  }
[logging]
  kdc = FILE:%[6]s
`, KDCRealm, k.addr, filepath.Join(dir, "principal"), filepath.Join(dir, "stash"), filepath.Join(dir, "kadm5.acl"), k.log)
	kdcConf := filepath.Join(dir, "kdc.conf")
	for path, text := range map[string]string{k.conf: client, kdcConf: kdc, filepath.Join(dir, "kadm5.acl"): ""} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return nil, fmt.Errorf("zktest: %w", err)
		}
	}
	k.env = append(os.Environ(), "KRB5_CONFIG="+k.conf, "KRB5_KDC_PROFILE="+kdcConf)
	// The master password only protects the throwaway database.
	if err := k.run(ctx, tools["kdb5_util"], "create", "-s", "-r", KDCRealm, "-P", "zktest-master"); err != nil {
		return nil, err
	}
	k.cmd = exec.Command(tools["krb5kdc"], "-n", "-r", KDCRealm)
	k.cmd.Env = k.env
	k.cmd.Dir = dir
	var out bytes.Buffer
	k.cmd.Stdout, k.cmd.Stderr = &out, &out
	k.cmd.SysProcAttr = sysProcAttr()
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("zktest: start krb5kdc: %w", err)
	}
	k.done = make(chan struct{})
	go func() {
		k.cmd.Wait()
		close(k.done)
	}()
	for {
		c, err := net.DialTimeout("tcp", k.addr, time.Second)
		if err == nil {
			c.Close()
			return k, nil
		}
		select {
		case <-k.done:
			return nil, fmt.Errorf("zktest: krb5kdc exited: %s%s", out.String(), fileTail(k.log))
		case <-ctx.Done():
			return nil, fmt.Errorf("zktest: krb5kdc not listening on %s: %w", k.addr, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// StartKDCT starts a KDC like StartKDC and stops it when the test ends. If
// MIT Kerberos is not installed it skips the test, or fails it in CI (see
// SkipOrFail).
func StartKDCT(tb testing.TB) *KDC {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), Bound(time.Minute))
	defer cancel()
	k, err := StartKDC(ctx)
	SkipOrFail(tb, err)
	tb.Cleanup(func() {
		if err := k.Close(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return k
}

// run runs a Kerberos tool on the KDC's configuration.
func (k *KDC) run(ctx context.Context, tool string, args ...string) error {
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Env = k.env
	cmd.Dir = k.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("zktest: %s %s: %w: %s", filepath.Base(tool), strings.Join(args, " "), err, out)
	}
	return nil
}

// kadmin runs one kadmin.local query.
func (k *KDC) kadmin(ctx context.Context, query string) error {
	tools, err := kdcTools()
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return fmt.Errorf("zktest: KDC closed")
	}
	// kadmin.local prints what it did, and reports some failures only
	// there: check the principal afterwards where it matters.
	return k.run(ctx, tools["kadmin.local"], "-r", KDCRealm, "-q", query)
}

// AddUser creates the principal name (without realm, "bob" or
// "zookeeper/localhost") with password.
func (k *KDC) AddUser(ctx context.Context, name, password string) error {
	if strings.ContainsAny(name+password, "\"\n") {
		return fmt.Errorf("zktest: AddUser: quotes and newlines are not supported")
	}
	return k.kadmin(ctx, fmt.Sprintf(`addprinc -pw "%s" %s`, password, name))
}

// AddKeytab creates the principal name with a random key, unless it
// exists, and returns the path of a new keytab holding its key (in the
// KDC's directory). Keytabs of a principal stay valid: the key is not
// changed.
func (k *KDC) AddKeytab(ctx context.Context, name string) (string, error) {
	if strings.ContainsAny(name, "\" \n") {
		return "", fmt.Errorf("zktest: AddKeytab: bad principal name %q", name)
	}
	// Fails, in its output only, if the principal exists.
	if err := k.kadmin(ctx, "addprinc -randkey "+name); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(k.dir, strings.ReplaceAll(name, "/", "_")+"-*.keytab")
	if err != nil {
		return "", fmt.Errorf("zktest: %w", err)
	}
	path := f.Name()
	f.Close()
	os.Remove(path) // kadmin writes a new file
	if err := k.kadmin(ctx, fmt.Sprintf("ktadd -norandkey -k %s %s", path, name)); err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("zktest: keytab of %s not written: %w", name, err)
	}
	return path, nil
}

// Config returns the path of a krb5.conf for clients of the KDC (its realm
// is the default one; TCP only): KRB5_CONFIG for MIT tools,
// java.security.krb5.conf for Java, config.Load for gokrb5.
func (k *KDC) Config() string { return k.conf }

// Addr returns the KDC's address, "127.0.0.1:port".
func (k *KDC) Addr() string { return k.addr }

// Close stops the KDC and removes its directory. It may be called more than
// once.
func (k *KDC) Close() error {
	k.mu.Lock()
	closed := k.closed
	k.closed = true
	k.mu.Unlock()
	if closed {
		return nil
	}
	if k.cmd != nil && k.cmd.Process != nil {
		signalGroup(k.cmd.Process.Pid, syscall.SIGKILL)
		<-k.done
	}
	if err := os.RemoveAll(k.dir); err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	return nil
}
