package zktest

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
)

// proxied returns a proxy to the shared server, a session through it and a
// session straight to the server.
func proxied(t *testing.T) (p *Proxy, via, direct *zkclient.Client) {
	t.Helper()
	addr := sharedAddr(t)
	p = NewProxyT(t, addr)
	via = connectZK(t, p.Addr())
	t.Cleanup(p.Pass) // let the session close cleanly
	direct = connectZK(t, addr)
	return p, via, direct
}

// async runs f in a goroutine and returns its result.
func async(f func() error) <-chan error {
	c := make(chan error, 1)
	go func() { c <- f() }()
	return c
}

func pending(t *testing.T, c <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-c:
		t.Fatalf("request completed (%v), want it held", err)
	case <-time.After(d):
	}
}

func result(t *testing.T, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(Bound(10 * time.Second)):
		t.Fatal("request did not complete")
		return nil
	}
}

var openACL = zkclient.WorldACL(zkclient.PermAll)

func TestProxyPassAndFourLetter(t *testing.T) {
	checkLeaks(t)
	p, via, direct := proxied(t)
	path := testPath("proxy-pass")
	if _, err := via.Create(t.Context(), path, nil, zkclient.Persistent, openACL); err != nil {
		t.Fatal(err)
	}
	if !exists(t, direct, path) {
		t.Fatal("node created through the proxy is missing")
	}
	if n := p.Conns(); n != 1 {
		t.Fatalf("Conns = %d, want 1", n)
	}
	// Four-letter words are not framed and pass through as they are.
	ctx := testContext(t)
	if got, err := zkadmin.FourLetter(ctx, p.Addr(), "ruok"); err != nil || got != "imok" {
		t.Fatalf("ruok through proxy = %q, %v", got, err)
	}

	// A dead target fails new connections; the old target works again.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	p.SetTarget(dead)
	if got, _ := zkadmin.FourLetter(ctx, p.Addr(), "ruok"); got == "imok" {
		t.Fatal("ruok answered through a dead target")
	}
	p.SetTarget(sharedAddr(t))
	if got, err := zkadmin.FourLetter(ctx, p.Addr(), "ruok"); err != nil || got != "imok" {
		t.Fatalf("ruok after SetTarget = %q, %v", got, err)
	}
}

func TestProxyPause(t *testing.T) {
	checkLeaks(t)
	p, via, direct := proxied(t)
	path := testPath("proxy-pause")
	p.Pause()
	res := async(func() error {
		_, err := via.Create(t.Context(), path, nil, zkclient.Persistent, openACL)
		return err
	})
	pending(t, res, 300*time.Millisecond)
	if exists(t, direct, path) {
		t.Fatal("paused request reached the server")
	}
	p.Pass()
	if err := result(t, res); err != nil {
		t.Fatal(err)
	}
	if !exists(t, direct, path) {
		t.Fatal("released request did not reach the server")
	}
}

func TestProxyPauseReplies(t *testing.T) {
	checkLeaks(t)
	p, via, direct := proxied(t)
	path := testPath("proxy-pause-replies")
	p.PauseReplies()
	res := async(func() error {
		_, err := via.Create(t.Context(), path, nil, zkclient.Persistent, openACL)
		return err
	})
	// The request goes through: the node appears while its answer is held.
	Eventually(t, 10*time.Second, "the request to reach the server with replies paused", func() error {
		if !exists(t, direct, path) {
			return fmt.Errorf("no %s", path)
		}
		return nil
	})
	select {
	case err := <-res:
		t.Fatalf("request completed (%v) with its answer held", err)
	default:
	}
	p.Pass()
	if err := result(t, res); err != nil {
		t.Fatal(err)
	}
}

// TestProxyPauseRepliesOnRequest: requests before the trap's opcode are
// answered; the trap's request reaches the server, and its answer is held
// until Pass.
func TestProxyPauseRepliesOnRequest(t *testing.T) {
	checkLeaks(t)
	p, via, direct := proxied(t)
	path := testPath("proxy-pause-on-request")
	fired := p.PauseRepliesOnRequest(opCreate)
	if _, _, err := via.Exists(t.Context(), "/"); err != nil {
		t.Fatalf("a read before the trap's create: %v", err)
	}
	select {
	case <-fired:
		t.Fatal("the trap fired on a read")
	default:
	}
	res := async(func() error {
		_, err := via.Create(t.Context(), path, nil, zkclient.Persistent, openACL)
		return err
	})
	Eventually(t, 10*time.Second, "the create to reach the server", func() error {
		if !exists(t, direct, path) {
			return fmt.Errorf("no %s", path)
		}
		return nil
	})
	select {
	case <-fired:
	default:
		t.Fatal("the node was made but the trap did not fire")
	}
	select {
	case err := <-res:
		t.Fatalf("create completed (%v) with its answer held", err)
	default:
	}
	p.Pass()
	if err := result(t, res); err != nil {
		t.Fatal(err)
	}
}

func TestProxyDelay(t *testing.T) {
	checkLeaks(t)
	p, via, _ := proxied(t)
	const d = 150 * time.Millisecond
	p.Delay(d)
	start := time.Now()
	if _, _, err := via.Exists(t.Context(), "/"); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 2*d {
		t.Fatalf("round trip took %v with Delay(%v) each way", rtt, d)
	}
	p.Pass()
	// A delayed round trip takes 2d: one shorter than d shows the delay
	// gone. A starved machine may slow a few down, so several are tried.
	var rtts []time.Duration
	for range 10 {
		start = time.Now()
		if _, _, err := via.Exists(t.Context(), "/"); err != nil {
			t.Fatal(err)
		}
		rtt := time.Since(start)
		if rtt < d {
			return
		}
		rtts = append(rtts, rtt)
	}
	t.Fatalf("round trips took %v after Pass", rtts)
}

func TestProxyBlackholeAndCut(t *testing.T) {
	checkLeaks(t)
	p, via, direct := proxied(t)
	sid := via.SessionID()
	path := testPath("proxy-blackhole")
	p.Blackhole()
	res := async(func() error {
		_, err := via.Create(t.Context(), path, nil, zkclient.Persistent, openACL)
		return err
	})
	pending(t, res, 300*time.Millisecond)
	if n := p.Conns(); n != 1 {
		t.Fatalf("Conns = %d during Blackhole, want 1", n)
	}
	p.Pass()
	pending(t, res, 200*time.Millisecond) // dropped, not held
	p.Cut()
	if err := result(t, res); !errors.Is(err, zkclient.ErrConnectionLoss) {
		t.Fatalf("request on a cut connection: %v, want %v", err, zkclient.ErrConnectionLoss)
	}
	if exists(t, direct, path) {
		t.Fatal("blackholed request reached the server")
	}
	// The client reconnects through the proxy to the same session.
	waitConnected(t, via, 10*time.Second)
	if via.SessionID() != sid {
		t.Fatalf("session changed from %x to %x", sid, via.SessionID())
	}
	if n := p.Conns(); n != 1 {
		t.Fatalf("Conns = %d after reconnecting, want 1", n)
	}
}

func TestProxyRefuse(t *testing.T) {
	checkLeaks(t)
	p, via, _ := proxied(t)
	sid := via.SessionID()
	p.Refuse(true)
	p.Cut()
	time.Sleep(1500 * time.Millisecond) // the client retries about every second
	if via.State().Live() {
		t.Fatal("client reconnected through a refusing proxy")
	}
	if n := p.Conns(); n != 0 {
		t.Fatalf("Conns = %d while refusing, want 0", n)
	}
	p.Refuse(false)
	waitConnected(t, via, 10*time.Second)
	if via.SessionID() != sid {
		t.Fatalf("session changed from %x to %x", sid, via.SessionID())
	}
}

func TestProxyCutOnRequest(t *testing.T) {
	for _, forward := range []bool{true, false} {
		t.Run(map[bool]string{true: "forward", false: "drop"}[forward], func(t *testing.T) {
			checkLeaks(t)
			p, via, direct := proxied(t)
			path := testPath(t.Name()[len("TestProxyCutOnRequest/"):])
			select {
			case <-p.Tripped():
				t.Fatal("Tripped closed before any trap")
			default:
			}
			p.CutOnRequest(opCreate, forward)
			// Other requests pass.
			if _, _, err := via.Exists(t.Context(), "/"); err != nil {
				t.Fatal(err)
			}
			_, err := via.Create(t.Context(), path, nil, zkclient.Persistent, openACL)
			if !errors.Is(err, zkclient.ErrConnectionLoss) {
				t.Fatalf("create with a trap: %v, want %v", err, zkclient.ErrConnectionLoss)
			}
			select {
			case <-p.Tripped():
			case <-time.After(Bound(5 * time.Second)):
				t.Fatal("Tripped not closed")
			}
			if forward {
				Eventually(t, 5*time.Second, path+" to be created", func() error {
					if !exists(t, direct, path) {
						return errors.New("not there")
					}
					return nil
				})
			} else if exists(t, direct, path) {
				t.Fatalf("dropped create of %s reached the server", path)
			}
			// The trap is one-shot: the client reconnects and creates.
			waitConnected(t, via, 10*time.Second)
			if _, err := via.Create(t.Context(), path+"-after", nil, zkclient.Persistent, openACL); err != nil {
				t.Fatal(err)
			}
		})
	}
}
