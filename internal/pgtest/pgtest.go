// Package pgtest starts throwaway PostgreSQL clusters for tests: initdb on
// a temporary directory, a postmaster listening on a Unix socket there
// only, and fresh databases on demand. Any test package of the module can
// use it:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		dsn := pgtest.Shared(t).NewDatabase(t)
//		...
//	}
//
// PostgreSQL refuses to run as root, and CI runs tests as root: then the
// cluster runs as the "postgres" system user (Debian's postgresql package
// creates it). The postmaster is a direct child of the test process with a
// parent-death signal, so it stops even when the test binary dies; Main and
// Stop stop it on every normal exit, failures included.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres means no PostgreSQL server binaries were found; tests skip
// on it (and only on it).
var ErrNoPostgres = errors.New("no PostgreSQL installation found")

// BinDirEnv names an optional environment variable holding the directory
// of initdb and postgres, tried before PATH and /usr/lib/postgresql.
const BinDirEnv = "MEMHOST_PG_BINDIR"

// startTimeout bounds initdb plus the server's start.
const startTimeout = 60 * time.Second

// Options tune a cluster.
type Options struct {
	// Durable keeps fsync on, for benchmarks that measure commits. Tests
	// leave it off: the cluster is thrown away, and crash tests kill the
	// plugin, never the server.
	Durable bool
}

// Cluster is one running throwaway server.
type Cluster struct {
	dir    string // holds data/ and the socket
	socket string
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
	logf   string
	bin    string
	args   []string
	cred   *syscall.Credential

	mu  sync.Mutex
	seq int
}

// FindBinDir answers the directory holding initdb and postgres: $BinDirEnv,
// then initdb on PATH, then the newest /usr/lib/postgresql/*/bin.
func FindBinDir() (string, error) {
	var candidates []string
	if d := os.Getenv(BinDirEnv); d != "" {
		candidates = append(candidates, d)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versions, func(a, b string) int { return versionOf(b) - versionOf(a) })
	candidates = append(candidates, versions...)
	for _, d := range candidates {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("pgtest: %w (looked in $%s, PATH and /usr/lib/postgresql/*/bin; install Debian's postgresql package)", ErrNoPostgres, BinDirEnv)
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// serverUser answers the credential to run the server with: none when the
// test runs as an ordinary user, the postgres system user under root.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and PostgreSQL refuses root, but there is no postgres system user to run it as: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: postgres user ids: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Start initialises and starts a cluster. The caller must Stop it.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	// Under /tmp, not $TMPDIR: the postgres user must reach it, and the
	// socket path must stay under the kernel's 107-byte limit.
	dir, err := os.MkdirTemp("/tmp", "memhost-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	c := &Cluster{dir: dir, socket: dir, port: 5432, logf: filepath.Join(dir, "server.log")}
	if err := c.start(ctx, bin, cred, opts); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, bin string, cred *syscall.Credential, opts Options) error {
	data := filepath.Join(c.dir, "data")
	if cred != nil {
		if err := os.Chown(c.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: hand %s to the postgres user: %w", c.dir, err)
		}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = c.dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	fsync := "off"
	if opts.Durable {
		fsync = "on"
	}
	c.args = []string{"-D", data, "-k", c.socket, "-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=", "-c", "max_connections=300", "-c", "fsync=" + fsync,
		"-c", "shared_buffers=256MB", "-c", "unix_socket_permissions=0777",
		"-c", "autovacuum=off", "-c", "wal_level=minimal", "-c", "max_wal_senders=0"}
	if !opts.Durable {
		c.args = append(c.args, "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	c.bin, c.cred = bin, cred
	return c.launch(ctx)
}

// launch starts the server on the initialised data directory and waits
// until it accepts connections.
func (c *Cluster) launch(ctx context.Context) error {
	logFile, err := os.OpenFile(c.logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer logFile.Close()
	// postgres itself, not pg_ctl: as a direct child it gets a parent-death
	// signal (set after the credential change, which would clear it), so
	// a test binary that dies takes its server with it.
	c.cmd = exec.Command(filepath.Join(c.bin, "postgres"), c.args...)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	c.cmd.Dir = c.dir
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	exited := make(chan struct{})
	c.exited = exited
	cmd := c.cmd
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	for {
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("pgtest: postgres exited at start:\n%s", c.Log())
		case <-ctx.Done():
			return fmt.Errorf("pgtest: postgres not ready after %v: %v\n%s", startTimeout, err, c.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StopServer stops the server (fast shutdown: sessions are cut,
// committed data stays) and keeps its data, for tests of outages;
// StartServer brings it back.
func (c *Cluster) StopServer() { c.stopServer() }

// StartServer starts a server StopServer stopped, on the same data.
func (c *Cluster) StartServer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	return c.launch(ctx)
}

// Log answers the server's log so far, for failure messages.
func (c *Cluster) Log() string {
	data, _ := os.ReadFile(c.logf)
	return string(data)
}

// DSN answers a connection string for database db, over the socket.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", c.socket, c.port, db)
}

// CreateDatabase creates an empty database and answers its name; it
// lasts as long as the cluster.
func (c *Cluster) CreateDatabase(ctx context.Context) (string, error) {
	c.mu.Lock()
	c.seq++
	name := fmt.Sprintf("test_%d", c.seq)
	c.mu.Unlock()
	if err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return name, nil
}

// NewDatabase creates an empty database and answers its connection
// string; it is dropped when tb ends.
func (c *Cluster) NewDatabase(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name, err := c.CreateDatabase(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE: a plugin a failed test left running must not keep it.
		if err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Logf("pgtest: %v", err)
		}
	})
	return c.DSN(name)
}

// Exec runs sql as the superuser on the postgres database, for tests that
// stage faults (terminating backends, say).
func (c *Cluster) Exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", strings.Fields(sql)[0], err)
	}
	return nil
}

// Stop shuts the server down (fast shutdown, then SIGKILL after ten
// seconds) and removes its directory. Stopping twice is harmless.
func (c *Cluster) Stop() {
	c.stopServer()
	os.RemoveAll(c.dir)
}

func (c *Cluster) stopServer() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
	}
}

var shared struct {
	sync.Mutex
	clusters map[Options]*Cluster
	errs     map[Options]error
}

// Shared answers the test process's one cluster, started on first use and
// stopped by Main. Without PostgreSQL the test is skipped, saying why; any
// other start failure fails it.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	return SharedWith(tb, Options{})
}

// SharedWith is Shared for a cluster started with opts (one per distinct
// Options).
func SharedWith(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.clusters == nil {
		shared.clusters, shared.errs = map[Options]*Cluster{}, map[Options]error{}
	}
	c, err := shared.clusters[opts], shared.errs[opts]
	if c == nil && err == nil {
		c, err = Start(context.Background(), opts)
		shared.clusters[opts], shared.errs[opts] = c, err
	}
	switch {
	case errors.Is(err, ErrNoPostgres):
		tb.Skipf("skipping: %v", err)
	case err != nil:
		tb.Fatal(err)
	}
	return c
}

// Main runs the tests, then stops the shared clusters that started; call
// it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	StopShared()
	return code
}

// StopShared stops every shared cluster, for a TestMain that cannot use
// Main (it already wraps m.Run in another helper).
func StopShared() {
	shared.Lock()
	defer shared.Unlock()
	for opts, c := range shared.clusters {
		if c != nil {
			c.Stop()
		}
		delete(shared.clusters, opts)
	}
}

// SetReadOnly makes every transaction of the server behind dsn (a
// superuser's) read-only, as a demoted primary's are, and waits until the
// reload is signalled: every session reads it at its next command.
func SetReadOnly(t testing.TB, dsn string) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, q := range []string{"ALTER SYSTEM SET default_transaction_read_only = on", "SELECT pg_reload_conf()"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var on string
		if err := admin.QueryRow(ctx, "SHOW default_transaction_read_only").Scan(&on); err != nil {
			t.Fatal(err)
		}
		if on == "on" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not turn read-only")
		}
	}
}
