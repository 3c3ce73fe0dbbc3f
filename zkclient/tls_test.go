package zkclient_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestTLS talks to ZooKeeper's secure client port (Netty, client
// certificates required): the session is authenticated under the x509
// scheme, an x509 ACL admits it, and a client without a certificate gets
// no session.
func TestTLS(t *testing.T) {
	zktest.SkipOrFail(t, sharedErr)
	cluster := zktest.StartT(t, zktest.Options{TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(time.Minute))
	defer cancel()
	c, err := zkclient.Connect(ctx, cluster.SecureAddrs(), zkclient.WithTLS(cluster.ClientTLS()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	who, err := c.WhoAmI(ctx)
	if err != nil || !slices.Contains(who, zkclient.ClientInfo{Scheme: "x509", User: zktest.TLSClientID}) {
		t.Fatalf("whoAmI over TLS: %+v %v", who, err)
	}
	acl := []zkclient.ACL{{Perms: zkclient.PermAll, Scheme: "x509", ID: zktest.TLSClientID}}
	if _, err := c.Create(ctx, "/tls", []byte("x"), zkclient.Persistent, acl); err != nil {
		t.Fatal(err)
	}
	if d, _, err := c.Get(ctx, "/tls"); err != nil || string(d) != "x" {
		t.Fatalf("get over TLS: %q %v", d, err)
	}
	plain, err := zkclient.Connect(ctx, cluster.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, _, err := plain.Get(ctx, "/tls"); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Fatalf("plain client read an x509-only node: %v", err)
	}

	noCert := cluster.ClientTLS()
	noCert.Certificates = nil
	sctx, scancel := context.WithTimeout(ctx, zktest.Bound(2*time.Second))
	defer scancel()
	if c, err := zkclient.Connect(sctx, cluster.SecureAddrs(), zkclient.WithTLS(noCert)); !errors.Is(err, zkclient.ErrNoServer) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("connect without a client certificate: %v", err)
	}
	// The plain protocol on the secure port gets nowhere either.
	sctx2, scancel2 := context.WithTimeout(ctx, zktest.Bound(2*time.Second))
	defer scancel2()
	if c, err := zkclient.Connect(sctx2, cluster.SecureAddrs()); err == nil {
		c.Close()
		t.Fatal("a plain client got a session on the secure port")
	}
}
