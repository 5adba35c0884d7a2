package raftlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
	"github.com/raftlock/raftlock/clients/go/internal/testcluster"
)

// helperEnv names the mode a re-executed test binary runs as a client
// process of its own (mutual exclusion across processes, a paused holder).
const helperEnv = "RAFTLOCK_GO_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := helper(mode, os.Getenv("HELPER_ENDPOINTS"), os.Getenv("HELPER_NAME"), os.Getenv("HELPER_OUT")); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The examples read RAFTLOCK_ENDPOINTS, as programs do: a cluster of
	// their own.
	main := &testcluster.Main{}
	c := testcluster.Start(main, testcluster.Options{})
	os.Setenv(raftlock.EnvEndpoints, c.Endpoints())
	code := m.Run()
	main.Close()
	os.Exit(code)
}

// spawnHelper re-executes this test binary as a client process in mode.
func spawnHelper(t *testing.T, c *testcluster.Cluster, mode, name, out string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "HELPER_ENDPOINTS="+c.Endpoints(), "HELPER_NAME="+name, "HELPER_OUT="+out)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

func helper(mode, endpoints, name, out string) error {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	log := func(format string, args ...interface{}) { fmt.Fprintf(f, format+"\n", args...) }
	cl, err := raftlock.New(raftlock.Config{Endpoints: []string{endpoints}})
	if err != nil {
		return err
	}
	ctx := context.Background()
	defer cl.Close(ctx)
	switch {
	case strings.HasPrefix(mode, "mutex:"):
		n, _ := strconv.Atoi(strings.TrimPrefix(mode, "mutex:"))
		s, err := cl.NewSession(ctx, raftlock.WithTTL(10*time.Second))
		if err != nil {
			return err
		}
		m := raftlock.NewMutex(s, name)
		for i := 0; i < n; i++ {
			lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := m.Lock(lctx)
			cancel()
			if err != nil {
				return err
			}
			start := time.Now().UnixNano()
			time.Sleep(10 * time.Millisecond)
			if !m.Valid() {
				return errors.New("lost the lock while holding it")
			}
			log("hold %d %d %d", m.Token(), start, time.Now().UnixNano())
			if err := m.Unlock(ctx); err != nil {
				return err
			}
		}
		return nil
	case mode == "hold":
		s, err := cl.NewSession(ctx, raftlock.WithTTL(2*time.Second))
		if err != nil {
			return err
		}
		m := raftlock.NewMutex(s, name)
		if err := m.Lock(ctx); err != nil {
			return err
		}
		log("held %d %d", m.Token(), time.Now().UnixNano())
		for {
			// Read before the check, so that a pause after the check cannot
			// make a tick look later than it was.
			now, until := time.Now(), m.ValidUntil()
			valid := m.Valid()
			// The library's deadline, moved onto the wall clock the test shares.
			deadline := now.Add(until.Sub(now)).UnixNano()
			v := 0
			if valid {
				v = 1
			}
			log("tick %d %d %d", now.UnixNano(), v, deadline)
			if !valid {
				select {
				case <-m.Lost():
					log("lost %d %v", time.Now().UnixNano(), errors.Is(m.Err(), raftlock.ErrSessionLost))
				case <-time.After(5 * time.Second):
					log("notlost %d", time.Now().UnixNano())
				}
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

// connect is a client of c, closed when the test ends.
func connect(t *testing.T, c *testcluster.Cluster, mod ...func(*raftlock.Config)) *raftlock.Client {
	t.Helper()
	cfg := raftlock.Config{Endpoints: c.Clients}
	for _, f := range mod {
		f(&cfg)
	}
	cl, err := raftlock.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close(context.Background()) })
	return cl
}

func session(t *testing.T, cl *raftlock.Client, ttl time.Duration) *raftlock.Session {
	t.Helper()
	s, err := cl.NewSession(ctxT(t, 20*time.Second), raftlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ctxT is a context that ends after d or with the test.
func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls check every 20 ms until it holds.
func eventually(t *testing.T, what string, within time.Duration, check func() bool) {
	t.Helper()
	stop := time.Now().Add(within)
	for time.Now().Before(stop) {
		if check() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("not within %v: %s", within, what)
}

func waiters(t *testing.T, cl *raftlock.Client, name string) []uint64 {
	t.Helper()
	info, err := cl.Describe(ctxT(t, 10*time.Second), name)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, w := range info.Waiters {
		ids = append(ids, w.SessionID)
	}
	return ids
}

func readLines(t *testing.T, path string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l != "" {
			out = append(out, strings.Fields(l))
		}
	}
	return out
}

func num(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
