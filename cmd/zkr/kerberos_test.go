package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	krb "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/kerberos"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestKerberos locks under a node whose sasl ACL admits two Kerberos
// principals, logging in with a keytab by flags, with a password by
// environment and from a credentials cache made by kinit; a wrong password
// is a refusal (exit status 1) naming the flags.
func TestKerberos(t *testing.T) {
	t.Parallel()
	kdc := zktest.StartKDCT(t)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(time.Minute))
	defer cancel()
	appKeytab, err := kdc.AddKeytab(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if err := kdc.AddUser(ctx, "bob", "bob-pw"); err != nil {
		t.Fatal(err)
	}
	cluster := zktest.StartT(t, zktest.Options{Kerberos: kdc})
	addr := cluster.Addr(0)
	cfg, err := config.Load(kdc.Config())
	if err != nil {
		t.Fatal(err)
	}
	ownerKrb := krb.NewWithPassword("bob", zktest.KDCRealm, "bob-pw", cfg, krb.DisablePAFXFAST(true))
	t.Cleanup(ownerKrb.Destroy)
	owner := client(t, []string{addr}, zkclient.WithSASL(kerberos.GSSAPI(ownerKrb)))
	path := testPath(t, "lock")
	acl := append(zkclient.SASLACL(zkclient.PermAll, "app@"+zktest.KDCRealm), zkclient.SASLACL(zkclient.PermAll, "bob@"+zktest.KDCRealm)...)
	mkdirs(t, owner, path, acl)

	ccache := filepath.Join(t.TempDir(), "krb5cc")
	kinit := exec.CommandContext(ctx, "kinit", "-c", "FILE:"+ccache, "bob@"+zktest.KDCRealm)
	kinit.Env = []string{"KRB5_CONFIG=" + kdc.Config()}
	kinit.Stdin = strings.NewReader("bob-pw\n")
	if out, err := kinit.CombinedOutput(); err != nil {
		t.Fatalf("kinit: %v: %s", err, out)
	}

	for _, tt := range []struct {
		name string
		env  []string
		args []string
	}{
		{"keytab by flags", nil, []string{"--kerberos-principal", "app", "--kerberos-keytab", appKeytab, "--krb5-config", kdc.Config()}},
		{"password by environment", []string{"ZKR_KERBEROS_PRINCIPAL=bob@" + zktest.KDCRealm, "ZKR_KERBEROS_PASSWORD=bob-pw", "KRB5_CONFIG=" + kdc.Config()}, nil},
		{"credentials cache", []string{"KRB5CCNAME=FILE:" + ccache, "KRB5_CONFIG=" + kdc.Config()}, []string{"--kerberos-principal", "bob"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, append(tt.env, "ZKR_SERVERS="+addr), append(tt.args, "lock", path, "--", "sh", "-c", `test "$ZKR_FENCING_TOKEN" -gt 0`)...)
			if code := p.wait(30 * time.Second); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
			}
		})
	}

	r := zkr(t, "--servers", addr, "--kerberos-principal", "bob", "--kerberos-password", "wrong", "--krb5-config", kdc.Config(), "lock", path, "--", "true")
	t.Logf("%s", r.stderr)
	if r.code != exitFailure {
		t.Fatalf("wrong password: exit %d, want %d; stderr %q", r.code, exitFailure, r.stderr)
	}
	oneLineError(t, r)
	if !strings.Contains(r.stderr, "refused the credentials (see --auth, --sasl-user, --kerberos-principal, --tls-cert)") {
		t.Errorf("stderr does not say the credentials were refused: %q", r.stderr)
	}
	if kids, _, err := owner.Children(context.Background(), path); err != nil || len(kids) != 0 {
		t.Errorf("children of %s: %v %v, want none left", path, kids, err)
	}
}
