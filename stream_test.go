package zkrecipes_test

import (
	"context"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nextWithin returns the stream's next state, waiting at most d (scaled).
func nextWithin[T any](st *zkrecipes.Stream[T], d time.Duration) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(d))
	defer cancel()
	return st.Next(ctx)
}
