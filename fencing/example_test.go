package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/fencing"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// A holder writes to a SQL database under a lock: the fence table refuses
// the write if a newer holder has written, and the write's transaction is
// rolled back. (It needs a database and ZooKeeper, so it is not run.)
func ExampleTable_Write() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@db.example/app") // any driver: pgx, lib/pq, sqlite
	if err != nil {
		log.Fatal(err)
	}
	fence, err := fencing.NewTable(fencing.PostgreSQL, "fence")
	if err != nil {
		log.Fatal(err)
	}
	if err := fence.Create(ctx, db); err != nil { // or run fence.DDL() in a migration
		log.Fatal(err)
	}

	s, err := zkrecipes.NewSession(ctx, []string{"zk1.example:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	m := zkrecipes.NewMutex(s, "/app/locks/invoices")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)

	err = fence.Write(ctx, db, nil, "invoices", m.Token(), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE invoices SET state = 'sent' WHERE id = $1", 42)
		return err
	})
	if errors.Is(err, fencing.ErrStale) {
		log.Print("another holder has taken over: ", err) // nothing was written
		return
	}
	if err != nil {
		log.Fatal(err)
	}
}

// A server refuses requests from a holder that a newer holder has
// replaced; the client sends its lock's token with every request.
func ExampleGuard() {
	guard := &fencing.Guard{Store: &fencing.MemoryStore{}}
	srv := httptest.NewServer(guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := fencing.TokenFrom(r.Context())
		fmt.Fprintf(w, "written with token %d", token)
	})))
	defer srv.Close()

	// The Source is the holder's lock (a *zkrecipes.Mutex); here, fixed tokens.
	put := func(token int64) {
		client := &http.Client{Transport: &fencing.Transport{
			Source: fencing.TokenFunc(func() int64 { return token }),
			Base:   srv.Client().Transport,
		}}
		resp, err := client.Post(srv.URL+"/reports/today", "text/plain", nil)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		if err := fencing.CheckResponse(resp); err != nil {
			fmt.Println(resp.Status, err)
			return
		}
		fmt.Println(resp.Status)
	}
	put(5) // A holds
	put(7) // A paused; its session expired; B holds
	put(5) // A resumes
	// Output:
	// 200 OK
	// 200 OK
	// 409 Conflict fencing: write to "/reports/today" refused: its token 5 is lower than 7, a newer holder's
}

// A register in ZooKeeper keeps a value with the token of its writer.
// (It needs ZooKeeper, so it is not run.)
func ExampleRegister() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, []string{"zk1.example:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	m := zkrecipes.NewMutex(s, "/app/locks/config")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)

	reg := fencing.NewRegister(s, "/app/config", nil)
	var stale *fencing.StaleError
	switch err := reg.Write(ctx, m.Token(), []byte("replicas=3")); {
	case errors.As(err, &stale):
		log.Printf("a holder with token %d has written since: stop", stale.Highest)
	case err != nil:
		log.Fatal(err)
	}
}

// Replicas of a service share their Guards' highest tokens in ZooKeeper,
// so that none admits a token lower than one another admitted. (It needs
// ZooKeeper, so it is not run.)
func ExampleZooKeeperStore() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, []string{"zk1.example:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateParents(ctx, "/app/fences/x", zkclient.Persistent, nil); err != nil {
		log.Fatal(err)
	}
	guard := &fencing.Guard{Store: fencing.NewZooKeeperStore(s.Client(), "/app/fences", nil)}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /reports/{day}", func(w http.ResponseWriter, r *http.Request) {
		token, _ := fencing.TokenFrom(r.Context()) // admitted: no higher token seen by any replica
		fmt.Fprintf(w, "written with token %d\n", token)
	})
	log.Fatal(http.ListenAndServe(":8080", guard.Wrap(mux)))
}
