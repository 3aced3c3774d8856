// Package localpg runs a throwaway PostgreSQL cluster from the PostgreSQL
// binaries installed on this machine. `maestro dev` uses it when DATABASE_URL
// is unset, and the test helper uses it to give tests a real database.
//
// PostgreSQL refuses to run as root, so when this process is root the cluster
// is owned by, and the server runs as, the "postgres" system user that the
// Debian packages create.
package localpg

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// ErrNoPostgres reports that no PostgreSQL server binaries were found.
var ErrNoPostgres = errors.New("PostgreSQL server binaries (initdb, postgres, pg_ctl) not found; " +
	"install them with `apt-get update && apt-get install -y postgresql` " +
	"(or your platform's package), or set DATABASE_URL to an existing database")

// Cluster is one PostgreSQL data directory and the server that serves it.
type Cluster struct {
	// Dir is the cluster's data directory.
	Dir string
	// Port is the TCP port the server listens on, on 127.0.0.1.
	Port int
	// Settings are extra `-c name=value` server settings.
	Settings map[string]string

	bin  string
	cred *syscall.Credential
}

// Options configure Open.
type Options struct {
	// Dir is the data directory; created and initialised when empty.
	Dir string
	// Port to listen on; 0 picks a free port (or reuses the one the
	// cluster last ran on).
	Port int
	// Settings are extra server settings, e.g. {"fsync": "off"} for tests.
	Settings map[string]string
}

// Open initialises the cluster in opts.Dir if needed. It does not start it.
func Open(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolve data dir: %w", err)
	}
	c := &Cluster{Dir: dir, Port: opts.Port, Settings: opts.Settings, bin: bin}
	if os.Geteuid() == 0 {
		cred, err := postgresUser()
		if err != nil {
			return nil, err
		}
		c.cred = cred
		// A clone under root's home (mode 0700) is out of the postgres
		// user's reach: the cluster then lives in a directory of the
		// system's temporary directory named after the one asked for, so
		// every later Open of the same path finds it again.
		if !traversable(filepath.Dir(dir), cred) {
			h := fnv.New32a()
			h.Write([]byte(dir))
			c.Dir = filepath.Join(os.TempDir(), fmt.Sprintf("maestro-pg-%08x", h.Sum32()))
		}
	}
	if err := c.initdb(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// FindBinDir locates the directory holding initdb, pg_ctl and postgres:
// $PG_BINDIR, then Debian's /usr/lib/postgresql/<newest>/bin, then $PATH.
func FindBinDir() (string, error) {
	var candidates []string
	if d := os.Getenv("PG_BINDIR"); d != "" {
		candidates = append(candidates, d)
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versions, func(i, j int) bool { return pgVersion(versions[i]) > pgVersion(versions[j]) })
	candidates = append(candidates, versions...)
	candidates = append(candidates, "/usr/local/pgsql/bin", "/opt/homebrew/bin", "/usr/local/bin")
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, d := range candidates {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoPostgres
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// traversable reports whether the user of cred may pass through dir and
// each of its parents (execute permission for its owner, group or others).
func traversable(dir string, cred *syscall.Credential) bool {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			// Not made yet: initdb's MkdirAll creates it traversable.
			if parent := filepath.Dir(d); parent != d {
				continue
			}
			return true
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return true
		}
		mode := st.Mode().Perm()
		switch {
		case sys.Uid == cred.Uid:
			if mode&0o100 == 0 {
				return false
			}
		case sys.Gid == cred.Gid:
			if mode&0o010 == 0 {
				return false
			}
		case mode&0o001 == 0:
			return false
		}
		if parent := filepath.Dir(d); parent == d {
			return true
		}
	}
}

func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs the 'postgres' system user to own the cluster: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (c *Cluster) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.Dir, "PG_VERSION")); err == nil {
		return nil
	}
	// Parents stay traversable: the server may run as another user.
	if err := os.MkdirAll(filepath.Dir(c.Dir), 0o755); err != nil {
		return fmt.Errorf("create data dir parent: %w", err)
	}
	if err := os.Mkdir(c.Dir, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("create data dir: %w", err)
	}
	if c.cred != nil {
		if err := os.Chown(c.Dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("chown data dir: %w", err)
		}
	}
	out, err := c.command(ctx, "initdb", "-D", c.Dir, "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync").CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb %s: %w: %s", c.Dir, err, out)
	}
	return nil
}

func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

// Running reports whether a server is serving this data directory, and on
// which port.
func (c *Cluster) Running(ctx context.Context) (int, bool) {
	if err := c.command(ctx, "pg_ctl", "-D", c.Dir, "status").Run(); err != nil {
		return 0, false
	}
	// Line 4 of postmaster.pid is the port.
	b, err := os.ReadFile(filepath.Join(c.Dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0, false
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	return port, err == nil
}

// Start starts the server in the background (it outlives this process) and
// waits until it accepts connections. Starting a running cluster is a no-op.
func (c *Cluster) Start(ctx context.Context) error {
	if port, ok := c.Running(ctx); ok {
		c.Port = port
		return nil
	}
	if c.Port == 0 {
		p, err := freePort()
		if err != nil {
			return err
		}
		c.Port = p
	}
	opts := []string{
		"-p " + strconv.Itoa(c.Port),
		"-c listen_addresses=127.0.0.1",
		"-c unix_socket_directories=" + c.Dir,
	}
	keys := make([]string, 0, len(c.Settings))
	for k := range c.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		opts = append(opts, fmt.Sprintf("-c %s=%s", k, c.Settings[k]))
	}
	logFile := filepath.Join(c.Dir, "server.log")
	cmd := c.command(ctx, "pg_ctl", "-D", c.Dir, "-l", logFile, "-w", "-t", "60",
		"-o", strings.Join(opts, " "), "start")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail, _ := os.ReadFile(logFile)
		return fmt.Errorf("start postgres in %s: %w: %s\n%s", c.Dir, err, out, lastLines(string(tail), 20))
	}
	return nil
}

// Stop stops the server (fast shutdown). Stopping a stopped cluster is a no-op.
func (c *Cluster) Stop(ctx context.Context) error {
	if _, ok := c.Running(ctx); !ok {
		return nil
	}
	out, err := c.command(ctx, "pg_ctl", "-D", c.Dir, "-m", "fast", "-w", "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("stop postgres in %s: %w: %s", c.Dir, err, out)
	}
	return nil
}

// URL is the connection string for database db as the superuser.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
