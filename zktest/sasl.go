package zktest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// saslProvider is ZooKeeper's authentication provider of the sasl scheme,
// which ACLs naming sasl:<user> need.
const saslProvider = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"

// checkSASLUsers refuses names and passwords the JAAS file cannot carry:
// Java's JAAS parser reads an option name as one word (letters, digits and
// . _ - $ *) and a quoted value up to the end of its line.
func checkSASLUsers(users map[string]string) error {
	for name, password := range users {
		if name == "" {
			return fmt.Errorf("zktest: SASLUsers: empty user name")
		}
		for _, r := range name {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("._-$*", r)) {
				return fmt.Errorf("zktest: SASLUsers: user name %q: only letters, digits and . _ - $ * fit in a JAAS file", name)
			}
		}
		if strings.ContainsAny(password, "\r\n") {
			return fmt.Errorf("zktest: SASLUsers: the password of %q spans lines, which a JAAS file cannot hold", name)
		}
	}
	return nil
}

// jaasConfig renders the JAAS file whose Server section ZooKeeper reads
// for SASL: DigestLoginModule with one user_<name>="<password>" option
// per user, in name order.
func jaasConfig(users map[string]string) string {
	var b strings.Builder
	b.WriteString("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required")
	for _, name := range slices.Sorted(maps.Keys(users)) {
		p := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(users[name])
		fmt.Fprintf(&b, "\n  user_%s=\"%s\"", name, p)
	}
	b.WriteString(";\n};\n")
	return b.String()
}

// KerberosServerPrincipal is the service principal of a ZooKeeper started
// with Options.Kerberos (in the KDC's realm): ZooKeeper's service name and
// the host clients name it by.
const KerberosServerPrincipal = "zookeeper/localhost"

// writeJAAS writes the JAAS file of opts to path: DIGEST-MD5's users, or
// with Kerberos a Server section that logs the service principal in from
// a keytab it creates, to accept only (no ticket is asked for at start).
func writeJAAS(ctx context.Context, path string, opts Options) error {
	text := jaasConfig(opts.SASLUsers)
	if k := opts.Kerberos; k != nil {
		keytab, err := k.AddKeytab(ctx, KerberosServerPrincipal)
		if err != nil {
			return err
		}
		text = fmt.Sprintf(`Server {
  com.sun.security.auth.module.Krb5LoginModule required
  useKeyTab=true
  keyTab="%s"
  storeKey=true
  useTicketCache=false
  isInitiator=false
  principal="%s@%s";
};
`, keytab, KerberosServerPrincipal, KDCRealm)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	return nil
}

// saslConfigLines writes the zoo.cfg lines of SASL. ZooKeeper turns keys
// it does not parse into system properties zookeeper.<key>, where its
// provider registry and authentication helper read them.
func saslConfigLines(line func(string, ...any), opts Options) {
	line("authProvider.sasl=%s", saslProvider)
	if opts.RequireSASL {
		line("sessionRequireClientSASLAuth=true")
	}
}
