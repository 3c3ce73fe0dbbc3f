package zkgrpc_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkgrpc"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// A server registers while it serves (Serve); a client dials the service
// by name through the resolver, and its calls go to the registered
// instances.
func ExampleNewBuilder() {
	zk, err := zkserver.Run() // an embedded ZooKeeper, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer zk.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	newSession := func(ctx context.Context) (*zkrecipes.Session, error) {
		return zkrecipes.NewSession(ctx, []string{zk.Addr()})
	}

	// The server: registered as an instance of "health" while it serves.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	served := make(chan error, 1)
	go func() {
		served <- zkgrpc.Serve(ctx, srv, lis, newSession, "/services", zkrecipes.ServiceInstance{Name: "health"})
	}()

	// The client: zk:///<service>, spread over the instances.
	conn, err := grpc.NewClient("zk:///health",
		grpc.WithResolvers(zkgrpc.NewBuilder(newSession, "/services")),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	// WaitForReady: the call waits for the registration to be found.
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.GetStatus())

	srv.GracefulStop() // unregisters, then drains
	if err := <-served; err != nil {
		log.Fatal(err)
	}
	// Output:
	// SERVING
}
