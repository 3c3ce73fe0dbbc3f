package zkrecipes_test

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"

	"github.com/zkrecipes/zkrecipes"
)

// A Provider picks an instance of a service to call, over a local copy of
// the service's instances; NoteError reports a failed call, and an instance
// that keeps failing is skipped for a while.
func ExampleDiscovery_Provider() {
	ctx, s, done := exampleSession()
	defer done()
	d := zkrecipes.NewDiscovery(s, "/services")
	for _, id := range []string{"a", "b", "c"} {
		payload, _ := zkrecipes.MarshalPayload(map[string]string{"zone": "eu-" + id}, "")
		if _, err := d.Register(ctx, zkrecipes.ServiceInstance{Name: "api", ID: id, Address: "10.0.0.1", Port: 8080, Payload: payload}); err != nil {
			log.Fatal(err)
		}
	}

	p, err := d.Provider(ctx, "api", zkrecipes.WithStrategy(zkrecipes.RoundRobin()))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	for range 4 {
		in, err := p.Instance()
		if err != nil {
			log.Fatal(err)
		}
		meta, _ := zkrecipes.Payload[map[string]string](in)
		fmt.Println(in.ID, meta["zone"])
	}
	b := p.Instances()[1]
	p.NoteError(b)
	p.NoteError(b) // twice within 30 s: down for 30 s
	fmt.Println(len(p.Instances()), "usable")
	// Output:
	// a eu-a
	// b eu-b
	// c eu-c
	// a eu-a
	// 2 usable
}

// A ServiceCache follows a service's instances without a request per
// read; Stale tells whether the copy is within its bound (see
// ServiceCache), as a Provider checks before each pick.
func ExampleDiscovery_ServiceCache() {
	ctx, s, done := exampleSession()
	defer done()
	d := zkrecipes.NewDiscovery(s, "/services")
	c, err := d.ServiceCache(ctx, "worker")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	changed := c.Changed()
	if _, err := d.Register(ctx, zkrecipes.ServiceInstance{Name: "worker", ID: "w1", Address: "10.0.0.2", Port: 9000}); err != nil {
		log.Fatal(err)
	}
	<-changed // the registration reached the copy
	for _, in := range c.Instances() {
		fmt.Println(in.ID, in.Address, in.Port)
	}
	if err := c.Stale(); err != nil {
		fmt.Println("stale:", err)
	} else {
		fmt.Println("within the bound")
	}
	// Output:
	// w1 10.0.0.2 9000
	// within the bound
}

// A ServiceTransport sends requests for zk://<service>/... to the
// service's instances.
func ExampleServiceTransport() {
	ctx, s, done := exampleSession()
	defer done()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	portN, _ := strconv.Atoi(port)
	d := zkrecipes.NewDiscovery(s, "/services")
	if _, err := d.Register(ctx, zkrecipes.ServiceInstance{Name: "web", Address: host, Port: portN}); err != nil {
		log.Fatal(err)
	}

	tr := &zkrecipes.ServiceTransport{Discovery: d}
	defer tr.Close()
	client := &http.Client{Transport: tr}
	resp, err := client.Get("zk://web/greeting")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output:
	// hello from /greeting
}
