//go:build linux

package sqltest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// postgres is a PostgreSQL server the tests started: Debian's
// postgresql, in a temporary directory, on a free loopback port, run as
// the postgres user when the tests run as root (it refuses to run as
// root).
type postgres struct {
	cmd    *exec.Cmd
	dir    string
	dsn    string
	exited chan struct{}
	stderr strings.Builder
}

// pgBinDir returns the bin directory of the newest PostgreSQL installed
// the Debian way (/usr/lib/postgresql/<major>/bin), or an error marked
// zktest.Unavailable that says how to install it.
func pgBinDir() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(found) == 0 {
		return "", zktest.Unavailable(errors.New("fencing tests: no PostgreSQL in /usr/lib/postgresql/*/bin: install it with `apt-get install -y postgresql`"))
	}
	slices.SortFunc(found, func(a, b string) int { return major(a) - major(b) })
	return filepath.Dir(found[len(found)-1]), nil
}

// major is the major version in a path /usr/lib/postgresql/<major>/bin/postgres.
func major(p string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
	return n
}

// startPostgres runs initdb and postgres, and returns once the server
// accepts connections.
func startPostgres(ctx context.Context) (_ *postgres, err error) {
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	dir, err := os.MkdirTemp("", "fencing-pg-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("fencing tests: PostgreSQL refuses to run as root and there is no postgres user to run it as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "fencing", "-A", "trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = attr
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("fencing tests: initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &postgres{dir: dir, exited: make(chan struct{}),
		dsn: fmt.Sprintf("postgres://fencing@127.0.0.1:%d/postgres?sslmode=disable", port)}
	// Durability is not under test: no fsync, for speed.
	p.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	p.cmd.SysProcAttr = attr
	p.cmd.Dir = dir
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("fencing tests: start postgres: %w", err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	db, err := sql.Open("pgx", p.dsn)
	if err != nil {
		p.stop()
		return nil, err
	}
	defer db.Close()
	err = zktest.Poll(zktest.Bound(30*time.Second), func() error {
		select {
		case <-p.exited:
			return nil
		default:
		}
		return db.PingContext(ctx)
	})
	select {
	case <-p.exited:
		err = fmt.Errorf("fencing tests: postgres exited: %s", p.stderr.String())
	default:
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("fencing tests: postgres on port %d: %w", port, err)
	}
	return p, nil
}

// stop shuts the server down (fast shutdown: sessions are ended) and
// removes its directory.
func (p *postgres) stop() {
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.exited:
	case <-time.After(zktest.Bound(10 * time.Second)):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	os.RemoveAll(p.dir)
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
