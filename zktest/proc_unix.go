//go:build unix

package zktest

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// signalGroup sends sig to the process group led by pid. A group that is
// already gone is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Freeze stops process pid with SIGSTOP, as a long garbage collection or a
// frozen virtual machine would stop it, and keeps it stopped until thaw is
// called, even if something else sends it SIGCONT (a stall injector
// freezing and thawing the test's process tree): it is stopped again
// within milliseconds. thaw ends that and sends SIGCONT; calling it again
// does nothing. Freeze returns once SIGSTOP is sent; the kernel may take a
// moment to stop the process.
func Freeze(pid int) (thaw func() error, err error) {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("zktest: freeze process %d: %w", pid, err)
	}
	stop, held := make(chan struct{}), make(chan struct{})
	go keepStopped(func() { syscall.Kill(pid, syscall.SIGSTOP) }, stop, nil, held)
	var once sync.Once
	return func() error {
		err := error(nil)
		once.Do(func() {
			close(stop)
			<-held
			if e := syscall.Kill(pid, syscall.SIGCONT); e != nil && !errors.Is(e, syscall.ESRCH) {
				err = fmt.Errorf("zktest: thaw process %d: %w", pid, e)
			}
		})
		return err
	}, nil
}

// keepStopped sends SIGSTOP (through stopAgain) every 5 ms until stop or
// done closes, then closes held.
func keepStopped(stopAgain func(), stop, done <-chan struct{}, held chan<- struct{}) {
	defer close(held)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-done:
			return
		case <-t.C:
			stopAgain()
		}
	}
}
