package zkserver

import "os"

// SetFsync makes s call fn instead of (*os.File).Sync for its transaction
// log and snapshots. Call it before Start.
func SetFsync(s *Server, fn func(f *os.File) error) { s.fsync = fn }
