// Package pgtemp runs a throwaway PostgreSQL cluster from the machine's PostgreSQL binaries
// (initdb, pg_ctl) in a temporary directory: it backs `redrive demo`, so that a newcomer needs no
// database set up. When the process runs as root, the cluster runs as the `postgres` user, since
// PostgreSQL refuses to run as root. Stop shuts the server down and removes the directory.
package pgtemp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"
)

// ErrNoBinaries means initdb or pg_ctl could not be found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found: " +
	"install them (Debian/Ubuntu: apt-get install postgresql; macOS: brew install postgresql) " +
	"or pass --database-url to use an existing server")

// Config configures a temporary cluster.
type Config struct {
	// BinDir holds initdb and pg_ctl. Defaults to the first directory that has both among PATH
	// and /usr/lib/postgresql/*/bin (newest version first).
	BinDir string
	// Port is the TCP port on 127.0.0.1. Defaults to a free port.
	Port int
	// StartTimeout bounds initdb plus server start. Defaults to 60s.
	StartTimeout time.Duration
}

// Cluster is a running temporary PostgreSQL cluster.
type Cluster struct {
	dir    string
	data   string
	binDir string
	port   int
	cred   *syscall.Credential
}

// FindBinDir returns the directory holding initdb and pg_ctl, or ErrNoBinaries.
func FindBinDir() (string, error) {
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versions, func(i, j int) bool { return pgVersion(versions[i]) > pgVersion(versions[j]) })
	candidates = append(candidates, versions...)
	for _, dir := range candidates {
		if isExec(filepath.Join(dir, "initdb")) && isExec(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// Start creates and starts a cluster. The caller must call Stop.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.BinDir == "" {
		dir, err := FindBinDir()
		if err != nil {
			return nil, err
		}
		cfg.BinDir = dir
	} else if !isExec(filepath.Join(cfg.BinDir, "initdb")) || !isExec(filepath.Join(cfg.BinDir, "pg_ctl")) {
		return nil, fmt.Errorf("%s: %w", cfg.BinDir, ErrNoBinaries)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.Port == 0 {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		cfg.Port = p
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()

	dir, err := os.MkdirTemp("", "redrive-pg-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	c := &Cluster{dir: dir, data: filepath.Join(dir, "data"), binDir: cfg.BinDir, port: cfg.Port}
	if os.Geteuid() == 0 {
		cred, err := postgresCredential()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		c.cred = cred
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("chown %s: %w", dir, err)
		}
	}
	if err := c.run(ctx, "initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c synchronous_commit=off", c.port, dir)
	if err := c.run(ctx, "pg_ctl", "-D", c.data, "-o", opts, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w\nserver log:\n%s", err, log)
	}
	return c, nil
}

func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL needs an unprivileged user: no `postgres` user (%w); create one or pass --database-url", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (c *Cluster) run(ctx context.Context, tool string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, tool), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", tool, err, out)
	}
	return nil
}

// DSN returns the connection string of the cluster's `postgres` database.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Dir returns the cluster's temporary directory.
func (c *Cluster) Dir() string { return c.dir }

// Stop shuts the server down (fast mode) and removes the directory. It is safe to call twice.
func (c *Cluster) Stop(ctx context.Context) error {
	if c == nil || c.dir == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stopErr := c.run(ctx, "pg_ctl", "-D", c.data, "-m", "fast", "-w", "-t", "25", "stop")
	if stopErr != nil {
		// Make sure no server is left behind, then remove the files anyway.
		_ = c.run(ctx, "pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop")
	}
	rmErr := os.RemoveAll(c.dir)
	c.dir = ""
	return errors.Join(stopErr, rmErr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
