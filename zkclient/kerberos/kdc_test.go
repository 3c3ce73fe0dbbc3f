package kerberos_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/keytab"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestKDC: zktest's KDC starts, takes principals and keytabs (a second
// keytab of a principal holds the same keys), and Close removes it all.
// It lives here because reading a keytab takes gokrb5, which zktest's
// module does not require.
func TestKDC(t *testing.T) {
	k := zktest.StartKDCT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.AddUser(ctx, "bob", "pw"); err != nil {
		t.Fatal(err)
	}
	a, err := k.AddKeytab(ctx, "svc/host")
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.AddKeytab(ctx, "svc/host")
	if err != nil {
		t.Fatal(err)
	}
	keys := func(path string) string {
		kt, err := keytab.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		var s string
		for _, e := range kt.Entries {
			s += fmt.Sprintf("%d:%x ", e.Key.KeyType, e.Key.KeyValue)
		}
		return s
	}
	if ka, kb := keys(a), keys(b); a == b || ka == "" || ka != kb {
		t.Errorf("keytabs %s and %s hold different keys: %s, %s", a, b, ka, kb)
	}
	if err := k.AddUser(ctx, `x"y`, "pw"); err == nil {
		t.Error("a quoted name is accepted")
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(k.Config()); !os.IsNotExist(err) {
		t.Errorf("the KDC's directory is left: %v", err)
	}
	if err := k.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
