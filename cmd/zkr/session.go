package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

// session runs f on a new session (not strict), closed afterwards, with a
// context the first signal cancels: the skeleton of members, watch,
// services and the data commands. interrupted is what zkr returns when a
// signal ended the connecting or f: nil (exit status 0) for the commands
// that follow changes until interrupted, an error for those that do one
// thing.
func (a *app) session(cmd *cobra.Command, interrupted error, f func(ctx context.Context, s *zkrecipes.Session) error) error {
	sigs := catchSignals()
	defer sigs.release()
	ctx, stop := sigs.cancelOn(cmd.Context())
	defer stop()
	s, err := a.connect(ctx, false)
	if err == nil {
		defer closeSession(s)
		err = f(ctx, s)
	}
	if err != nil && ctx.Err() != nil {
		return interrupted
	}
	return err
}
