package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	krb "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/keytab"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/kerberos"
)

// kerberosMechanism returns the SASL GSSAPI mechanism of
// --kerberos-principal and the flags that go with it (or their
// variables), or nil without a principal. The credentials are, in this
// order, the keytab, the password, or the credentials cache kinit leaves
// ($KRB5CCNAME, else /tmp/krb5cc_<uid>). Nothing is sent to the KDC here:
// the client logs in when the first connection needs a ticket. The
// password is never repeated in a message.
func (a *app) kerberosMechanism() (zkclient.SASLMechanism, error) {
	principal := a.setting("kerberos-principal", a.krbPrincipal, "ZKR_KERBEROS_PRINCIPAL")
	kt := a.setting("kerberos-keytab", a.krbKeytab, "ZKR_KERBEROS_KEYTAB")
	password := a.setting("kerberos-password", a.krbPassword, "ZKR_KERBEROS_PASSWORD")
	host := a.setting("kerberos-service-host", a.krbServiceHost, "ZKR_KERBEROS_SERVICE_HOST")
	if principal.value == "" {
		for _, s := range []setting{kt, password, host} {
			if s.value != "" {
				return nil, usagef("%s given without --kerberos-principal ($ZKR_KERBEROS_PRINCIPAL)", s.from)
			}
		}
		return nil, nil
	}
	conf := a.setting("krb5-config", a.krbConfig, "KRB5_CONFIG")
	if conf.value == "" {
		conf = setting{"/etc/krb5.conf", "the default Kerberos configuration"}
	}
	text, err := os.ReadFile(conf.value)
	if err != nil {
		return nil, usagef("%s %q: cannot read: %v", conf.from, conf.value, unwrapPath(err))
	}
	cfg, err := config.NewFromString(string(text))
	if err != nil {
		return nil, usagef("%s %q: %v", conf.from, conf.value, err)
	}
	user, realm, _ := strings.Cut(principal.value, "@")
	if realm == "" {
		realm = cfg.LibDefaults.DefaultRealm
	}
	if user == "" || realm == "" {
		return nil, usagef("%s %q: expected user or user@REALM, and a realm (none in the principal, no default_realm in %s)", principal.from, principal.value, conf.value)
	}
	var cl *krb.Client
	switch {
	case kt.value != "":
		k, err := keytab.Load(kt.value)
		if err != nil {
			return nil, usagef("%s %q: cannot read: %v", kt.from, kt.value, unwrapPath(err))
		}
		cl = krb.NewWithKeytab(user, realm, k, cfg, krb.DisablePAFXFAST(true))
	case password.value != "":
		cl = krb.NewWithPassword(user, realm, password.value, cfg, krb.DisablePAFXFAST(true))
	default:
		path := strings.TrimPrefix(a.getenv("KRB5CCNAME"), "FILE:")
		if path == "" {
			path = fmt.Sprintf("/tmp/krb5cc_%d", os.Getuid())
		}
		cc, err := credentials.LoadCCache(path)
		if err != nil {
			return nil, usagef("%s without --kerberos-keytab or --kerberos-password: the credentials cache %s: %v (run kinit, or set $KRB5CCNAME)", principal.from, path, unwrapPath(err))
		}
		if got := cc.GetClientPrincipalName().PrincipalNameString() + "@" + cc.GetClientRealm(); got != user+"@"+realm {
			return nil, usagef("%s %q: the credentials cache %s holds %s", principal.from, principal.value, path, got)
		}
		if cl, err = krb.NewFromCCache(cc, cfg, krb.DisablePAFXFAST(true)); err != nil {
			return nil, usagef("the credentials cache %s: %v", path, err)
		}
	}
	var opts []kerberos.Option
	if host.value != "" {
		opts = append(opts, kerberos.WithServiceHost(host.value))
	}
	return kerberos.GSSAPI(cl, opts...), nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
