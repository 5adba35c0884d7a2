// Package testcluster starts real raftlockd clusters for the tests: three
// processes on free loopback ports in a temporary directory, killed by PID
// when the test ends. The binary is $RAFTLOCKD, else the workspace's
// target/debug/raftlockd.
package testcluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TB is what the fixture needs of a test: testing.TB has it, and so does
// Main, for a cluster that outlives single tests.
type TB interface {
	Helper()
	Fatalf(format string, args ...interface{})
	Cleanup(func())
	TempDir() string
}

// Main is a TB for TestMain: Fatalf panics, cleanups run at Close.
type Main struct {
	dirs     []string
	cleanups []func()
}

// Helper does nothing.
func (m *Main) Helper() {}

// Fatalf panics with the message.
func (m *Main) Fatalf(format string, args ...interface{}) { panic(fmt.Sprintf(format, args...)) }

// Cleanup registers f to run at Close.
func (m *Main) Cleanup(f func()) { m.cleanups = append(m.cleanups, f) }

// TempDir is a new temporary directory, removed at Close.
func (m *Main) TempDir() string {
	d, err := os.MkdirTemp("", "raftlock-go-")
	if err != nil {
		panic(err)
	}
	m.dirs = append(m.dirs, d)
	return d
}

// Close runs the cleanups, last first, and removes the directories.
func (m *Main) Close() {
	for i := len(m.cleanups) - 1; i >= 0; i-- {
		m.cleanups[i]()
	}
	for _, d := range m.dirs {
		_ = os.RemoveAll(d)
	}
}

// Binary is the raftlockd the tests run.
func Binary(t TB) string {
	if p := os.Getenv("RAFTLOCKD"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	// internal/testcluster -> clients/go -> the workspace root.
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "target", "debug", "raftlockd")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not found: build it with `cargo build --bins`, or set RAFTLOCKD", p)
	}
	return p
}

// FreePort is a loopback port nobody listens on now.
func FreePort(t TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Cluster is a cluster of raftlockd processes this test started.
type Cluster struct {
	t TB
	// Dir holds the nodes' data dirs and logs.
	Dir string
	// Clients are the nodes' client addresses, node i at i-1.
	Clients []string
	peers   []string
	initial string
	extra   []string
	token   string

	mu    sync.Mutex
	procs map[int]*exec.Cmd
}

// Options are extra settings of Start.
type Options struct {
	// Extra are raftlockd flags added to every node's.
	Extra []string
	// Token is a bearer token for the fixture's own status calls.
	Token string
}

// Start starts a 3-node cluster and waits for a leader; it is stopped when
// the test ends.
func Start(t TB, o Options) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Dir: t.TempDir(), extra: o.Extra, token: o.Token, procs: map[int]*exec.Cmd{}}
	var parts []string
	for i := 1; i <= 3; i++ {
		client := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
		peer := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
		c.Clients = append(c.Clients, client)
		c.peers = append(c.peers, peer)
		parts = append(parts, fmt.Sprintf("%d=%s/%s", i, peer, client))
	}
	c.initial = strings.Join(parts, ",")
	t.Cleanup(c.Stop)
	for i := 1; i <= 3; i++ {
		c.StartNode(i)
	}
	c.WaitLeader(30*time.Second, 0)
	return c
}

// Endpoints is the client addresses, comma-separated.
func (c *Cluster) Endpoints() string { return strings.Join(c.Clients, ",") }

// StartNode starts node i (1-based) with its data dir.
func (c *Cluster) StartNode(i int) {
	c.t.Helper()
	log, err := os.OpenFile(filepath.Join(c.Dir, fmt.Sprintf("n%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatalf("%v", err)
	}
	defer log.Close()
	args := []string{
		"--id", fmt.Sprint(i), "--data-dir", filepath.Join(c.Dir, fmt.Sprintf("n%d", i)),
		"--listen-client", c.Clients[i-1], "--listen-peer", c.peers[i-1], "--initial-cluster", c.initial,
	}
	cmd := exec.Command(Binary(c.t), append(args, c.extra...)...)
	cmd.Stdout, cmd.Stderr = log, log
	// A test binary that dies (a panic) takes its nodes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("%v", err)
	}
	c.mu.Lock()
	c.procs[i] = cmd
	c.mu.Unlock()
}

// Kill SIGKILLs node i and waits until it is gone.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	cmd := c.procs[i]
	delete(c.procs, i)
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// Stop kills every node this cluster started.
func (c *Cluster) Stop() {
	c.mu.Lock()
	ids := make([]int, 0, len(c.procs))
	for i := range c.procs {
		ids = append(ids, i)
	}
	c.mu.Unlock()
	for _, i := range ids {
		c.Kill(i)
	}
}

type status struct {
	NodeID   string `json:"nodeId"`
	Role     string `json:"role"`
	LeaderID string `json:"leaderId"`
}

// Leader is the node that says it leads, or 0.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	ids := make([]int, 0, len(c.procs))
	for i := range c.procs {
		ids = append(ids, i)
	}
	c.mu.Unlock()
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	for _, i := range ids {
		req, _ := http.NewRequest(http.MethodPost, "http://"+c.Clients[i-1]+"/v1/cluster/status", bytes.NewReader([]byte("{}")))
		req.Header.Set("content-type", "application/json")
		if c.token != "" {
			req.Header.Set("authorization", "Bearer "+c.token)
		}
		res, err := hc.Do(req)
		if err != nil {
			continue
		}
		var s status
		err = json.NewDecoder(res.Body).Decode(&s)
		res.Body.Close()
		if err == nil && res.StatusCode == 200 && s.Role == "ROLE_LEADER" && s.LeaderID == s.NodeID {
			return i
		}
	}
	return 0
}

// WaitLeader waits for a leader other than node otherThan (0: any).
func (c *Cluster) WaitLeader(within time.Duration, otherThan int) int {
	c.t.Helper()
	stop := time.Now().Add(within)
	for time.Now().Before(stop) {
		if n := c.Leader(); n != 0 && n != otherThan {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("no leader within %v; logs:\n%s", within, c.Logs())
	return 0
}

// Logs is the end of every node's log.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for i := 1; i <= 3; i++ {
		data, _ := os.ReadFile(filepath.Join(c.Dir, fmt.Sprintf("n%d.log", i)))
		lines := strings.Split(string(data), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		fmt.Fprintf(&b, "--- n%d\n%s\n", i, strings.Join(lines, "\n"))
	}
	return b.String()
}

// Dev is a `raftlockd dev` this test started, with what it printed.
type Dev struct {
	// Vars are the VAR=value lines it printed (RAFTLOCK_ENDPOINTS, ...).
	Vars map[string]string
	// CertFile and KeyFile are the root identity's client certificate.
	CertFile, KeyFile string
	cmd               *exec.Cmd
}

// StartDev runs `raftlockd dev ARGS` until it prints that its nodes are
// up; it gets SIGTERM (stopping its nodes) when the test ends.
func StartDev(t TB, args ...string) *Dev {
	t.Helper()
	cmd := exec.Command(Binary(t), append([]string{"dev"}, args...)...)
	// SIGTERM, so that dev stops its nodes too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("%v", err)
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v", err)
	}
	d := &Dev{Vars: map[string]string{}, cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "RAFTLOCK_") && !strings.Contains(k, " ") {
				d.Vars[k] = v
			}
			if i := strings.Index(line, "--cert "); i >= 0 {
				f := strings.Fields(line[i:])
				if len(f) >= 4 {
					d.CertFile, d.KeyFile = f[1], f[3]
				}
			}
			if strings.Contains(line, "nodes up") && !signalled {
				signalled = true
				close(up)
			}
		}
	}()
	select {
	case <-up:
	case <-time.After(60 * time.Second):
		t.Fatalf("raftlockd dev %v did not come up: %v", args, d.Vars)
	}
	return d
}
