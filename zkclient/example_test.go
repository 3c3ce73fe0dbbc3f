package zkclient_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// exampleClient starts an embedded server and connects a client to it;
// done closes both.
func exampleClient() (c *zkclient.Client, done func()) {
	srv, err := zkserver.Run() // an embedded server; use your ensemble's addresses
	if err != nil {
		log.Fatal(err)
	}
	c, err = zkclient.Connect(context.Background(), []string{srv.Addr()})
	if err != nil {
		log.Fatal(err)
	}
	return c, func() { c.Close(); srv.Close() }
}

// Connect, write, read: every call takes a context and fails with an error
// comparable with errors.Is.
func Example() {
	srv, err := zkserver.Run() // an embedded server; use your ensemble's addresses
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := zkclient.Connect(ctx, []string{srv.Addr()}, zkclient.WithSessionTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	acl := zkclient.WorldACL(zkclient.PermAll)
	if _, err := c.Create(ctx, "/config", []byte("v1"), zkclient.Persistent, acl); err != nil {
		log.Fatal(err)
	}
	data, st, err := c.Get(ctx, "/config")
	fmt.Println(string(data), st.Version, err)
	_, err = c.Set(ctx, "/config", []byte("v2"), 7)
	fmt.Println(err)
	// Output:
	// v1 0 <nil>
	// set /config: zookeeper: bad version
}

// Requests go out in call order and are answered in that order: start
// several, then wait for each, for one round trip instead of several.
func ExampleClient_ChildrenAsync() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()

	acl := zkclient.WorldACL(zkclient.PermAll)
	c.Create(ctx, "/queue", nil, zkclient.Persistent, acl)
	create := c.CreateAsync("/queue/item-", []byte("x"), zkclient.EphemeralSequential, acl)
	list := c.ChildrenAsync("/queue") // sent before the create is answered, sees it
	made, _ := create.Wait(ctx)
	l, _ := list.Wait(ctx)
	fmt.Println(made.Path, l.Names)
	// Output: /queue/item-0000000000 [item-0000000000]
}

// A one-shot watch delivers one event; a persistent recursive watch
// delivers every change below a node, in order, however slowly it is read.
func ExampleClient_AddWatch() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()
	acl := zkclient.WorldACL(zkclient.PermAll)

	c.Create(ctx, "/app", nil, zkclient.Persistent, acl)
	_, _, once, _ := c.GetW(ctx, "/app")
	all, _ := c.AddWatch(ctx, "/app", true)
	c.Set(ctx, "/app", []byte("x"), -1)
	c.Create(ctx, "/app/a", nil, zkclient.Persistent, acl)
	c.Delete(ctx, "/app/a", -1)

	fmt.Println("one-shot:", (<-once.Event()).Type)
	for range 3 {
		ev, _ := all.Next(ctx)
		fmt.Println("recursive:", ev.Type, ev.Path)
	}
	// Output:
	// one-shot: NodeDataChanged
	// recursive: NodeDataChanged /app
	// recursive: NodeCreated /app/a
	// recursive: NodeDeleted /app/a
}

// A reader that falls behind leaves events queued: Backlog counts them, for
// a gauge read now and then (an adapter gets the Client from
// Observer.Opened).
func ExampleClient_Backlog() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()
	acl := zkclient.WorldACL(zkclient.PermAll)

	c.Create(ctx, "/jobs", nil, zkclient.Persistent, acl)
	w, _ := c.AddWatch(ctx, "/jobs", true)
	// The server sends a change's notification ahead of the reply to the
	// write that made it: once Create returns, its event is queued.
	c.Create(ctx, "/jobs/a", nil, zkclient.Persistent, acl)
	c.Create(ctx, "/jobs/b", nil, zkclient.Persistent, acl)
	fmt.Println("unread:", c.Backlog())
	w.Next(ctx)
	fmt.Println("unread:", c.Backlog())
	// Output:
	// unread: 2
	// unread: 1
}

// The session's life as a stream that never drops a state.
func ExampleClient_States() {
	srv, err := zkserver.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	c, err := zkclient.Connect(ctx, []string{srv.Addr()})
	if err != nil {
		log.Fatal(err)
	}
	states := c.States()
	srv.ExpireSession(c.SessionID())
	for {
		ev, err := states.Next(ctx)
		if err != nil {
			break
		}
		fmt.Println(ev.State)
	}
	c.Close()
	// Output:
	// suspended
	// expired
}

// SASL DIGEST-MD5, as a ZooKeeper with a JAAS Server section
// (user_bob="s3cret") serves it: the session is known as sasl:bob, which a
// sasl ACL names; a wrong password is refused at once.
func ExampleWithSASL() {
	srv := zkserver.NewServer(zkserver.Options{SASLUsers: map[string]string{"bob": "s3cret"}})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := zkclient.Connect(ctx, []string{srv.Addr()}, zkclient.WithSASL(zkclient.DigestMD5("bob", "s3cret")))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(ctx, "/bobs", []byte("x"), zkclient.Persistent, zkclient.SASLACL(zkclient.PermAll, "bob")); err != nil {
		log.Fatal(err)
	}
	who, _ := c.WhoAmI(ctx)
	fmt.Println(who)

	_, err = zkclient.Connect(ctx, []string{srv.Addr()}, zkclient.WithSASL(zkclient.DigestMD5("bob", "guess")))
	fmt.Println(errors.Is(err, zkclient.ErrAuthFailed))
	// Output:
	// [{sasl bob} {ip 127.0.0.1}]
	// true
}

// Read the ensemble's membership and change it. The embedded server has
// no dynamic reconfiguration: its configuration is empty and it refuses
// reconfig. Against a ZooKeeper 3.5+ ensemble with reconfigEnabled=true,
// authenticated as a user who may write /zookeeper/config, Reconfig adds
// and removes members; WithFollowConfig keeps a client's server list the
// ensemble's.
func ExampleClient_Reconfig() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()

	cfg, err := c.Config(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("members:", len(cfg.Members), "version:", cfg.Version)

	// Add server 4 and remove server 2, only if no one changed the
	// configuration since it was read.
	_, err = c.Reconfig(ctx, []string{"server.4=10.0.0.4:2888:3888:participant;10.0.0.4:2181"}, []int64{2}, cfg.Version)
	if errors.Is(err, zkclient.ErrConnectionLoss) {
		// The answer was lost with the connection (removing the member
		// the client is on can do that): ask whether the change applied.
		now, applied, err := c.Reconfigured(ctx, cfg.Version)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("applied:", applied, "version:", now.Version)
	}
	fmt.Println(errors.Is(err, zkclient.ErrReconfigDisabled))
	// Output:
	// members: 0 version: 0
	// true
}
