package leaderelection_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
	"github.com/raftlock/raftlock/clients/go/internal/testcluster"
	"github.com/raftlock/raftlock/clients/go/leaderelection"
)

const helperEnv = "RAFTLOCK_GO_TEST_CANDIDATE"

func TestMain(m *testing.M) {
	if id := os.Getenv(helperEnv); id != "" {
		os.Exit(candidate(id, os.Getenv("CANDIDATE_ENDPOINTS"), os.Getenv("CANDIDATE_OUT")))
	}
	// The examples read RAFTLOCK_ENDPOINTS, as programs do.
	main := &testcluster.Main{}
	c := testcluster.Start(main, testcluster.Options{})
	os.Setenv(raftlock.EnvEndpoints, c.Endpoints())
	code := m.Run()
	main.Close()
	os.Exit(code)
}

// candidate campaigns as id and records, on the wall clock the test
// shares, when it started and stopped leading and, every 20 ms while
// leading, until when the library says the leadership is safe.
func candidate(id, endpoints, out string) int {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return 1
	}
	defer f.Close()
	log := func(format string, args ...interface{}) { fmt.Fprintf(f, format+"\n", args...) }
	cl, err := raftlock.New(raftlock.Config{Endpoints: []string{endpoints}})
	if err != nil {
		return 1
	}
	var le *leaderelection.LeaderElector
	// Run does not wait for OnStartedLeading (as in client-go); the process
	// does, to record when its context ended.
	returned := make(chan struct{})
	le, err = leaderelection.NewLeaderElector(leaderelection.Config{
		Client: cl, Name: "le/svc", Identity: id, TTL: 2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log("started %d %d", time.Now().UnixNano(), le.Token())
				// Other ways of telling the leadership ended, each in its own
				// goroutine: polling Done, on ctx and on a context derived
				// from it, waiting on Done alone, and IsLeader.
				dctx, dcancel := context.WithCancel(ctx)
				defer dcancel()
				var wg sync.WaitGroup
				poll := func(tag string, c context.Context) {
					defer wg.Done()
					for {
						now := time.Now()
						select {
						case <-c.Done():
							return
						default:
						}
						log("%s %d", tag, now.UnixNano())
						time.Sleep(20 * time.Millisecond)
					}
				}
				wait := func(tag string, c context.Context) {
					defer wg.Done()
					<-c.Done()
					log("%s %d", tag, time.Now().UnixNano())
				}
				wg.Add(5)
				go poll("dtick", ctx)
				go poll("xtick", dctx)
				go wait("waitdone", ctx)
				go wait("xwaitdone", dctx)
				go func() {
					defer wg.Done()
					for {
						now := time.Now()
						if !le.IsLeader() {
							return
						}
						log("ltick %d", now.UnixNano())
						time.Sleep(20 * time.Millisecond)
					}
				}()
				for {
					// Read before the check, so that a pause after the
					// check cannot make a tick look later than it was.
					now, until := time.Now(), le.ValidUntil()
					if ctx.Err() != nil {
						break
					}
					log("tick %d %d", now.UnixNano(), now.Add(until.Sub(now)).UnixNano())
					select {
					case <-ctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
				}
				wg.Wait()
				log("ctxdone %d", time.Now().UnixNano())
				close(returned)
			},
			OnStoppedLeading: func() { log("stopped %d", time.Now().UnixNano()) },
			OnNewLeader:      func(leader string) { log("newleader %s", leader) },
		},
	})
	if err != nil {
		return 1
	}
	le.Run(context.Background())
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
	}
	return 0
}

type record struct {
	started, ctxDone, stopped, lastTick, lastDeadline int64
	// The last time each poller found the leadership on, and when the
	// waiters on Done woke.
	lastDTick, lastXTick, lastLTick, waitDone, xWaitDone int64
	token                                                uint64
	leaders                                              []string
}

func read(t *testing.T, path string) record {
	t.Helper()
	data, _ := os.ReadFile(path)
	var r record
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "started":
			r.started = n
			tok, _ := strconv.ParseUint(f[2], 10, 64)
			r.token = tok
		case "ctxdone":
			r.ctxDone = n
		case "stopped":
			r.stopped = n
		case "tick":
			r.lastTick = n
			r.lastDeadline, _ = strconv.ParseInt(f[2], 10, 64)
		case "dtick":
			r.lastDTick = n
		case "xtick":
			r.lastXTick = n
		case "ltick":
			r.lastLTick = n
		case "waitdone":
			r.waitDone = n
		case "xwaitdone":
			r.xWaitDone = n
		case "newleader":
			r.leaders = append(r.leaders, f[1])
		}
	}
	return r
}

func spawn(t *testing.T, c *testcluster.Cluster, id, out string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+id, "CANDIDATE_ENDPOINTS="+c.Endpoints(), "CANDIDATE_OUT="+out)
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

func waitFor(t *testing.T, what string, within time.Duration, check func() bool) {
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

func TestLeadershipMovesOnlyAfterTheOldLeadersContextEnds(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	dir := t.TempDir()
	outA, outB, outC := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	a := spawn(t, c, "cand-a", outA)
	waitFor(t, "a leads", 20*time.Second, func() bool { return read(t, outA).lastTick != 0 })
	b := spawn(t, c, "cand-b", outB)
	waitFor(t, "b sees a lead", 20*time.Second, func() bool { l := read(t, outB).leaders; return len(l) > 0 && l[0] == "cand-a" })

	// A leader paused past its TTL: its OnStartedLeading context must count
	// as ended before the successor starts.
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now().UnixNano()
	waitFor(t, "b leads after a's TTL", 20*time.Second, func() bool { return read(t, outB).started != 0 })
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now().UnixNano()
	if err := a.Wait(); err != nil {
		t.Fatalf("candidate a: %v", err)
	}
	ra, rb := read(t, outA), read(t, outB)
	if rb.started < pausedAt+int64(time.Second) {
		t.Fatalf("b started %v after a's pause, inside a's TTL", time.Duration(rb.started-pausedAt))
	}
	if ra.lastTick >= rb.started || ra.lastDeadline > rb.started {
		t.Fatalf("a counted on leading until %d (last tick %d), b started at %d", ra.lastDeadline, ra.lastTick, rb.started)
	}
	for _, p := range []struct {
		what string
		last int64
	}{{"polling ctx.Done()", ra.lastDTick}, {"IsLeader", ra.lastLTick}} {
		if p.last == 0 || p.last >= rb.started {
			t.Fatalf("a, %s, counted on leading at %d; b started at %d", p.what, p.last, rb.started)
		}
	}
	// A derived context learns of the end only from the timer set at the
	// deadline: once resumed, a goroutine woken by the same resume may run
	// just before it (see the package documentation), never later than the
	// timers' first run.
	if ra.lastXTick == 0 || ra.lastXTick >= resumedAt+int64(100*time.Millisecond) {
		t.Fatalf("a, polling a context derived from ctx, counted on leading at %d; resumed at %d", ra.lastXTick, resumedAt)
	}
	for _, w := range []struct {
		what string
		at   int64
	}{{"ctx.Done()", ra.waitDone}, {"a derived context's Done()", ra.xWaitDone}} {
		if w.at == 0 || w.at-resumedAt > int64(time.Second) {
			t.Fatalf("a, waiting on %s, woke at %d, resumed at %d", w.what, w.at, resumedAt)
		}
	}
	if ra.ctxDone == 0 || ra.stopped == 0 {
		t.Fatalf("a's context must end and OnStoppedLeading run: %+v", ra)
	}
	if rb.token <= ra.token {
		t.Fatalf("term token %d after %d", rb.token, ra.token)
	}

	// The leader process killed: the next candidate takes over after the TTL.
	cc := spawn(t, c, "cand-c", outC)
	waitFor(t, "c sees b lead", 20*time.Second, func() bool {
		l := read(t, outC).leaders
		return len(l) > 0 && l[len(l)-1] == "cand-b"
	})
	rb = read(t, outB)
	if err := b.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = b.Wait()
	killedAt := time.Now().UnixNano()
	waitFor(t, "c leads after b is killed", 20*time.Second, func() bool { return read(t, outC).started != 0 })
	rc := read(t, outC)
	rb = read(t, outB)
	if rc.started < rb.lastDeadline || rc.started < killedAt {
		t.Fatalf("c started at %d, b counted on leading until %d", rc.started, rb.lastDeadline)
	}
	if rc.token <= rb.token {
		t.Fatalf("term token %d after %d", rc.token, rb.token)
	}
	_ = cc
}

func connect(t *testing.T, c *testcluster.Cluster) *raftlock.Client {
	t.Helper()
	cl, err := raftlock.New(raftlock.Config{Endpoints: c.Clients})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close(context.Background()) })
	return cl
}

// compete queues a campaign of its own in election name and sends the time
// it was elected.
func compete(t *testing.T, c *testcluster.Cluster, name string) <-chan time.Time {
	t.Helper()
	cl := connect(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	s, err := cl.NewSession(ctx, raftlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan time.Time, 1)
	go func() {
		if err := raftlock.NewElection(s, name).Campaign(ctx, "next"); err != nil {
			t.Errorf("competitor: %v", err)
			return
		}
		granted <- time.Now()
	}()
	waitFor(t, "the competitor in line", 10*time.Second, func() bool {
		info, err := cl.Describe(ctx, name)
		return err == nil && len(info.Waiters) == 1
	})
	return granted
}

// leaderWork is an OnStartedLeading that keeps working for a while after
// its context ends, and says when it started, when its context ended and
// when it returned.
type leaderWork struct {
	started           chan struct{}
	ctxDone, returned chan time.Time
	linger            time.Duration
}

func newLeaderWork(linger time.Duration) *leaderWork {
	return &leaderWork{started: make(chan struct{}), ctxDone: make(chan time.Time, 1), returned: make(chan time.Time, 1), linger: linger}
}

func (w *leaderWork) run(ctx context.Context) {
	close(w.started)
	<-ctx.Done()
	w.ctxDone <- time.Now()
	time.Sleep(w.linger)
	w.returned <- time.Now()
}

func TestRunOrDieResignsWhenItsContextEnds(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	work := newLeaderWork(200 * time.Millisecond)
	stopped := lead(t, ctx, cl, "le/resign", work)
	granted := compete(t, c, "le/resign")
	cancel()
	var at time.Time
	select {
	case at = <-granted:
	case <-time.After(5 * time.Second):
		t.Fatal("the leadership was not given up")
	}
	ctxDone, returned := <-work.ctxDone, <-work.returned
	if at.Before(ctxDone) || at.Before(returned) {
		t.Fatalf("the successor was elected at %v, the old leader's ctx ended at %v and its work at %v", at, ctxDone, returned)
	}
	if at.Sub(returned) > 3*time.Second {
		t.Fatalf("elected %v after the work stopped: left to expire rather than resigned", at.Sub(returned))
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("RunOrDie did not return")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("RunOrDie with no Name must panic")
			}
		}()
		leaderelection.RunOrDie(context.Background(), leaderelection.Config{Client: cl})
	}()
}

func TestClientCloseStopsTheLeadersWorkBeforeHandingOver(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl, err := raftlock.New(raftlock.Config{Endpoints: c.Clients})
	if err != nil {
		t.Fatal(err)
	}
	work := newLeaderWork(300 * time.Millisecond)
	stopped := lead(t, context.Background(), cl, "le/close", work)
	granted := compete(t, c, "le/close")
	if err := cl.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	var at time.Time
	select {
	case at = <-granted:
	case <-time.After(5 * time.Second):
		t.Fatal("the leadership was not given up on Close")
	}
	returned := <-work.returned
	if at.Before(returned) {
		t.Fatalf("the successor was elected at %v, before the old leader's work stopped at %v", at, returned)
	}
	if closed.Before(returned) {
		t.Fatal("Close returned before OnStartedLeading did")
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("RunOrDie did not return after Close")
	}
}

func TestGetLeaderWithoutOnNewLeader(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.Config{
		Client: cl, Name: "le/get", Identity: "me", TTL: 5 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(ctx context.Context) { close(started); <-ctx.Done() }},
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	go func() { le.Run(ctx); close(ran) }()
	select {
	case <-started:
	case <-ran:
		t.Fatalf("Run returned without leading: %v", le.Err())
	case <-time.After(20 * time.Second):
		t.Fatalf("never led (leader seen: %q); logs:\n%s", le.GetLeader(), c.Logs())
	}
	if !le.IsLeader() {
		t.Fatal("IsLeader false while leading")
	}
	waitFor(t, "GetLeader names the leader", 5*time.Second, func() bool { return le.GetLeader() == "me" })
	cancel()
	<-ran
	if le.IsLeader() {
		t.Fatal("IsLeader true after Run returned")
	}
}

// lead runs RunOrDie for name with work as its leader's work until it
// leads; the channel closes when OnStoppedLeading has run.
func lead(t *testing.T, ctx context.Context, cl *raftlock.Client, name string, work *leaderWork) <-chan struct{} {
	t.Helper()
	stopped := make(chan struct{})
	go func() {
		leaderelection.RunOrDie(ctx, leaderelection.Config{
			Client: cl, Name: name, Identity: "me", TTL: 10 * time.Second,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: work.run,
				OnStoppedLeading: func() { close(stopped) },
			},
		})
	}()
	select {
	case <-work.started:
	case <-time.After(20 * time.Second):
		t.Fatal("never led")
	}
	return stopped
}
