package zktest

import (
	"context"
	"strings"
	"testing"
)

// TestJAASConfig: the JAAS file lists the users in a Server section, in
// name order, with quotes and backslashes escaped; names and passwords
// the file cannot hold are refused before anything starts.
func TestJAASConfig(t *testing.T) {
	got := jaasConfig(map[string]string{"bob": `a"b\c`, "alice.x-1": "pw"})
	want := "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n" +
		"  user_alice.x-1=\"pw\"\n  user_bob=\"a\\\"b\\\\c\";\n};\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	for _, users := range []map[string]string{{"": "x"}, {"a b": "x"}, {"a=b": "x"}, {"bob": "two\nlines"}} {
		if _, err := Start(context.Background(), Options{SASLUsers: users}); err == nil || !strings.Contains(err.Error(), "SASLUsers") {
			t.Errorf("users %q: %v", users, err)
		}
	}
	if _, err := Start(context.Background(), Options{RequireSASL: true}); err == nil || !strings.Contains(err.Error(), "RequireSASL") {
		t.Errorf("RequireSASL without users: %v", err)
	}
}
