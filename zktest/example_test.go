package zktest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// Start a 3-member ensemble of real ZooKeeper servers, kill the member a
// client uses and bring it back. In a test, StartT does the same and closes
// the cluster when the test ends (or skips it where Java or ZooKeeper is
// missing). (Not run: it needs Java and ZooKeeper.)
func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := zktest.Start(ctx, zktest.Options{Servers: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	fmt.Println("connect to", c.Addrs())
	if err := c.Kill(0); err != nil {
		log.Fatal(err)
	}
	if err := c.Restart(ctx, 0); err != nil {
		log.Fatal(err)
	}
}

// A Proxy between a client and a server injects faults on that one link:
// here it delays every byte, then holds them all, then releases them in
// order and cuts the connections.
func ExampleProxy() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := zktest.Start(ctx, zktest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p, err := zktest.NewProxy(c.Addr(0))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	fmt.Println("point the client at", p.Addr())
	p.Delay(50 * time.Millisecond)
	p.Pause()
	p.Pass()
	p.Cut()
}
