package zkrecipes_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The Session reads and writes the program's own nodes on the connection
// its recipes use.
func ExampleSession_Create() {
	ctx, s, done := exampleSession()
	defer done()

	if err := s.CreateParents(ctx, "/app/config/db", zkclient.Persistent, nil); err != nil {
		log.Fatal(err)
	}
	if _, err := s.Create(ctx, "/app/config/db", []byte("primary"), zkclient.Persistent, nil); err != nil {
		log.Fatal(err)
	}
	data, st, err := s.Get(ctx, "/app/config/db")
	fmt.Println(string(data), st.Version, err)
	// A write at a stale version changes nothing.
	_, err = s.Set(ctx, "/app/config/db", []byte("replica"), 3)
	fmt.Println(errors.Is(err, zkclient.ErrBadVersion))
	kids, _, _ := s.Children(ctx, "/app/config")
	fmt.Println(kids)
	fmt.Println(s.DeleteTree(ctx, "/app"))
	// Output:
	// primary 0 <nil>
	// true
	// [db]
	// <nil>
}

// A write made under a lock can be made conditional on still holding it,
// in one transaction: a holder whose lock was taken from it (its node
// deleted) writes nothing.
func ExampleMutex_HeldOp() {
	ctx, s, done := exampleSession()
	defer done()
	if err := s.CreateParents(ctx, "/app/report", zkclient.Persistent, nil); err != nil {
		log.Fatal(err)
	}
	if _, err := s.Create(ctx, "/app/report", nil, zkclient.Persistent, nil); err != nil {
		log.Fatal(err)
	}

	m := zkrecipes.NewMutex(s, "/app/report-lock")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	c := s.Client()
	_, err := s.Multi(ctx, m.HeldOp(), c.SetOp("/app/report", []byte("done"), -1))
	fmt.Println(err)
	// Output:
	// <nil>
}

// States tells a program when to pause (Suspended), when its holdings are
// gone (Lost), and when it may go on (Reconnected).
func ExampleSession_States() {
	ctx, s, done := exampleSession()
	defer done()
	states := s.States()
	defer states.Close()
	s.Close()
	for {
		ev, err := states.Next(ctx)
		if err != nil {
			break // the stream ends after the final state
		}
		fmt.Println(ev.State)
	}
	// Output:
	// lost
	// closed
}
