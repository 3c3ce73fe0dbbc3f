package zkserver_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// Run starts a server on a free loopback port; any ZooKeeper client
// connects to its Addr. In a test, RunT closes it when the test ends.
func ExampleRun() {
	srv, err := zkserver.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := zkclient.Connect(ctx, []string{srv.Addr()})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(ctx, "/greeting", []byte("hello"), zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll)); err != nil {
		log.Fatal(err)
	}
	data, stat, err := c.Get(ctx, "/greeting")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(data), stat.Version)
	// Output: hello 0
}

// Metrics reads the figures mntr reports, under ZooKeeper's names: here
// the znodes and sessions after a client created a node.
func ExampleServer_Metrics() {
	srv, err := zkserver.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := zkclient.Connect(ctx, []string{srv.Addr()})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(ctx, "/app", nil, zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll)); err != nil {
		log.Fatal(err)
	}
	for _, m := range srv.Metrics() {
		switch m.Name {
		case "znode_count", "global_sessions":
			fmt.Println(m.Name, m.Value)
		}
	}
	// Output:
	// znode_count 5
	// global_sessions 1
}
