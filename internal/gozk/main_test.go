package gozk_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/bench"
	"github.com/zkrecipes/zkrecipes/internal/gozk"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// With -bench, one real ZooKeeper, configured as in production and warmed
// up, serves the benchmarks; the tests start their own servers.
var (
	shared    *zktest.Cluster
	sharedErr error
	// curatorDir holds the Curator workload's classes, built on first use
	// (see run).
	curatorDir string
)

func TestMain(m *testing.M) {
	flag.Parse()
	sharedErr = errors.New("no shared server: it is started for -bench only")
	if flag.Lookup("test.bench").Value.String() != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		shared, sharedErr = zktest.Start(ctx, zktest.Options{Production: true})
		cancel()
		if sharedErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			// As before the move: go-zookeeper/zk's Lock, then zkrecipes' Mutex.
			if err := bench.WarmWith(ctx, shared.Addrs(), "/warm", gozk.Run, "go-zookeeper", "zkrecipes"); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			cancel()
		}
	}
	dir, err := os.MkdirTemp("", "gozk-curator-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	curatorDir = dir
	code := m.Run()
	if curator != nil {
		curator.Close()
	}
	if shared != nil {
		shared.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
