package zkrecipes_test

import (
	"fmt"
	"log"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// A Cache keeps a local copy of a subtree: read it without a request, and
// follow its changes.
func ExampleNewCache() {
	ctx, s, done := exampleSession()
	defer done()
	c := s.Client()
	acl := zkclient.WorldACL(zkclient.PermAll)
	c.Create(ctx, "/config", nil, zkclient.Persistent, acl)
	c.Create(ctx, "/config/db", []byte("primary=a"), zkclient.Persistent, acl)

	cache, err := zkrecipes.NewCache(ctx, s, "/config")
	if err != nil {
		log.Fatal(err)
	}
	defer cache.Close()
	data, _, _ := cache.Get("/config/db")
	fmt.Printf("db: %s, children of /config: %q\n", data, cache.Children("/config"))

	// The stream starts with the initial tree, then its changes.
	c.Set(ctx, "/config/db", []byte("primary=b"), -1)
	for {
		ev, err := cache.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%v %s %q\n", ev.Type, ev.Path, ev.Data)
		if ev.Type == zkrecipes.CacheChanged {
			break
		}
	}
	// Output:
	// db: primary=a, children of /config: ["db"]
	// created /config ""
	// created /config/db "primary=a"
	// initialized /config ""
	// changed /config/db "primary=b"
}
