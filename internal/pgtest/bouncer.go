package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPgBouncer means no pgbouncer binary was found; tests skip on it.
var ErrNoPgBouncer = errors.New("pgbouncer is not installed (Debian package pgbouncer)")

// BouncerPoolSize is the server connections a test bouncer keeps per
// database and user: fewer than a provider's pool, so transactions of
// different clients share server connections, as under load.
const BouncerPoolSize = 2

// Bouncer is a PgBouncer in transaction pooling mode in front of a
// cluster, listening on loopback TCP.
type Bouncer struct {
	dir    string
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
	logf   string
}

// findPgBouncer answers the pgbouncer binary: PATH, then Debian's place
// (/usr/sbin is not on every PATH).
func findPgBouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if isExec("/usr/sbin/pgbouncer") {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", fmt.Errorf("pgtest: %w", ErrNoPgBouncer)
}

// freePort answers a loopback TCP port nothing listens on now (a
// variable: a test hands out a taken one).
var freePort = func() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartPgBouncer starts a pgbouncer with pool_mode = transaction that
// serves every database of c to the postgres user without a password.
// Like the server it runs as the postgres user under root (it refuses
// root too) and dies with the test process. The caller must Stop it.
func (c *Cluster) StartPgBouncer(ctx context.Context) (*Bouncer, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	bin, err := findPgBouncer()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("/tmp", "memhost-pgbouncer-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	b := &Bouncer{dir: dir, logf: filepath.Join(dir, "pgbouncer.log")}
	for attempt := 1; ; attempt++ {
		err := b.start(ctx, bin, c)
		if err == nil {
			return b, nil
		}
		// The port was free when chosen, but another process may bind it
		// before pgbouncer does (tests run in parallel): try another.
		if !errors.Is(err, errExitedAtStart) || attempt == 3 {
			b.Stop()
			return nil, err
		}
		b.stopProcess()
	}
}

// errExitedAtStart is a pgbouncer that ended before it answered.
var errExitedAtStart = errors.New("pgbouncer exited at start")

func (b *Bouncer) start(ctx context.Context, bin string, c *Cluster) error {
	if c.cred != nil {
		if err := os.Chown(b.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: hand %s to the postgres user: %w", b.dir, err)
		}
	}
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	b.port = port
	// pgbouncer appends to its log: an earlier try's lines would mislead
	// a later failure's message.
	if err := os.Remove(b.logf); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pgtest: %w", err)
	}
	users := filepath.Join(b.dir, "users.txt")
	ini := filepath.Join(b.dir, "pgbouncer.ini")
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 500
logfile = %s
pidfile =
`, c.socket, c.port, port, users, BouncerPoolSize, b.logf)
	for path, data := range map[string]string{users: `"postgres" ""` + "\n", ini: conf} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
	}
	b.cmd = exec.Command(bin, ini)
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	b.cmd.Dir = b.dir
	out, err := os.Create(filepath.Join(b.dir, "stderr.log"))
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer out.Close()
	b.cmd.Stdout, b.cmd.Stderr = out, out
	if err := b.cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start pgbouncer: %w", err)
	}
	exited := make(chan struct{})
	b.exited = exited
	cmd := b.cmd
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	for {
		// Each attempt is bounded on its own: another process that took
		// the port may accept and never answer, and pgbouncer's exit must
		// still be seen.
		check, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(check, b.DSN("postgres")+" default_query_exec_mode=exec statement_cache_capacity=0")
		cancel()
		if err == nil {
			conn.Close(ctx)
			select {
			case <-exited: // another server answered on the port
			default:
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("pgtest: %w:\n%s", errExitedAtStart, b.Log())
		case <-ctx.Done():
			return fmt.Errorf("pgtest: pgbouncer not ready after %v: %v\n%s", startTimeout, err, b.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// PgBouncer starts a bouncer in front of c for tb, stopped when tb ends.
// Without pgbouncer installed the test is skipped, saying why.
func (c *Cluster) PgBouncer(tb testing.TB) *Bouncer {
	tb.Helper()
	b, err := c.StartPgBouncer(context.Background())
	switch {
	case errors.Is(err, ErrNoPgBouncer):
		tb.Skipf("skipping: %v", err)
	case err != nil:
		tb.Fatal(err)
	}
	tb.Cleanup(b.Stop)
	return b
}

// DSN answers a connection string for database db through the bouncer.
func (b *Bouncer) DSN(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", b.port, db)
}

// Log answers the bouncer's log so far, for failure messages.
func (b *Bouncer) Log() string {
	log, _ := os.ReadFile(b.logf)
	out, _ := os.ReadFile(filepath.Join(b.dir, "stderr.log"))
	return string(log) + string(out)
}

// Stop stops the bouncer (SIGTERM: immediate shutdown, then SIGKILL after
// ten seconds) and removes its directory. Stopping twice is harmless.
func (b *Bouncer) Stop() {
	b.stopProcess()
	os.RemoveAll(b.dir)
}

// stopProcess ends the bouncer's process, if it has one running.
func (b *Bouncer) stopProcess() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			<-b.exited
		}
	}
}

// Port answers the bouncer's loopback port.
func (b *Bouncer) Port() int { return b.port }
