package zkrecipes

import "context"

// RoundTrip sends one read on s and waits for its answer. The server sends a
// session's watch events before the answers to its later requests, and the
// session counts events as it reads them, so afterwards s.Stats() includes
// every event the server sent s before RoundTrip was called.
func RoundTrip(ctx context.Context, s *Session) error {
	_, err := s.stat(ctx, "/")
	return err
}
