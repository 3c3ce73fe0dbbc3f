package zktest

import (
	"io"
	"os"
	"sync"
)

// tailSize is how much of a member's log failure messages quote.
const tailSize = 4 << 10

// tailBuffer is an io.Writer that remembers the last tailSize bytes
// written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// fileTail returns the last tailSize bytes of the named file.
func fileTail(name string) string {
	f, err := os.Open(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > tailSize {
		f.Seek(fi.Size()-tailSize, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, tailSize))
	return string(b)
}

// sharedWriter serializes writes of several members to one io.Writer and
// ignores its errors, so that a failing writer never blocks a server.
type sharedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *sharedWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Write(p)
	return len(p), nil
}
