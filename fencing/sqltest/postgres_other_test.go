//go:build !linux

package sqltest

import (
	"context"
	"errors"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// postgres is the server the Linux harness starts; elsewhere there is none.
type postgres struct{ dsn string }

func startPostgres(context.Context) (*postgres, error) {
	return nil, zktest.Unavailable(errors.New("fencing tests: the PostgreSQL harness runs on Linux only"))
}

func (*postgres) stop() {}
