package raftlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
)

// A lock held for one piece of work, its fencing token passed along.
func ExampleMutex() {
	ctx := context.Background()
	cli, err := raftlock.FromEnv() // RAFTLOCK_ENDPOINTS, RAFTLOCK_CACERT, RAFTLOCK_AUTH_TOKEN
	if err != nil {
		panic(err)
	}
	defer cli.Close(ctx)
	s, err := cli.NewSession(ctx, raftlock.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	m := raftlock.NewMutex(s, "example/nightly-report")
	lockCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := m.Lock(lockCtx); err != nil {
		panic(err)
	}
	// Hand m.Token() to whatever the lock protects; stop when m.Lost() closes.
	fmt.Println("holding with a token:", m.Token() > 0)
	if err := m.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output: holding with a token: true
}

// TryLock reports a busy lock as ErrLocked.
func ExampleMutex_TryLock() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	a, _ := cli.NewSession(ctx)
	b, _ := cli.NewSession(ctx)
	_ = raftlock.NewMutex(a, "example/cron").TryLock(ctx)
	err := raftlock.NewMutex(b, "example/cron").TryLock(ctx)
	fmt.Println(errors.Is(err, raftlock.ErrLocked))
	// Output: true
}

// Errors are matched by the server's reason with errors.Is.
func ExampleError() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	s, _ := cli.NewSession(ctx)
	m := raftlock.NewMutex(s, "example/fenced")
	_ = m.Lock(ctx)
	err := s.Release(ctx, "example/fenced", m.Token()+1)
	var e *raftlock.Error
	fmt.Println(errors.Is(err, raftlock.ErrStaleToken), errors.As(err, &e) && e.Reason == raftlock.ReasonStaleToken)
	// Output: true true
}

// Leader election: campaign, publish a value, watch, resign.
func ExampleElection() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	s, _ := cli.NewSession(ctx, raftlock.WithTTL(10*time.Second))
	e := raftlock.NewElection(s, "example/scheduler")
	if err := e.Campaign(ctx, "host-7:8080"); err != nil {
		panic(err)
	}
	octx, stop := context.WithCancel(ctx)
	first := <-e.Observe(octx)
	stop()
	fmt.Println("observed leader:", string(first.Leader.Metadata))
	_ = e.Proclaim(ctx, "host-7:9090")
	g, _ := e.Leader(ctx)
	fmt.Println("leader now:", string(g.Metadata))
	_ = e.Resign(ctx)
	_, err := e.Leader(ctx)
	fmt.Println("after resigning:", errors.Is(err, raftlock.ErrNoLeader))
	// Output:
	// observed leader: host-7:8080
	// leader now: host-7:9090
	// after resigning: true
}

// A rate limit of 100 per second, bursts of 20, taken one at a time or
// reserved in a block spent locally.
func ExampleRateLimit() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	rl := cli.RateLimit("example/partner-api", raftlock.RateLimitOptions{Rate: 100, Per: time.Second, Burst: 20})
	a, err := rl.TryTake(ctx, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println("admitted:", a.Admitted)
	block, _ := rl.Reserve(ctx, 10, time.Second)
	spent := 0
	for block.TrySpend() {
		spent++
	}
	_, _ = block.Finish(ctx)
	fmt.Println("spent from the block:", spent)
	// Output:
	// admitted: true
	// spent from the block: 10
}

// A counting semaphore: at most three holders at once.
func ExampleWithPermits() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	s, _ := cli.NewSession(ctx)
	m := raftlock.NewMutex(s, "example/pool", raftlock.WithPermits(3), raftlock.WithMetadata([]byte("worker-1")))
	_ = m.Lock(ctx)
	info, _ := cli.Describe(ctx, "example/pool")
	fmt.Println(info.Permits, string(info.Holders[0].Metadata))
	// Output: 3 worker-1
}

// A semaphore sized by Resize is listed, with its size, even when nobody
// holds it.
func ExampleClient_List() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	_, _ = cli.Resize(ctx, "example/workers", 8)
	locks, _ := cli.List(ctx, "example/workers")
	for _, l := range locks {
		fmt.Println(l.Name, l.Permits, l.Resized, len(l.Holders))
	}
	// Output: example/workers 8 true 0
}

// A client with explicit settings; New does not contact the cluster, the
// first call does.
func ExampleNew() {
	ctx := context.Background()
	cli, err := raftlock.New(raftlock.Config{
		Endpoints:   strings.Split(os.Getenv(raftlock.EnvEndpoints), ","), // "10.0.0.1:7000", ...
		Token:       os.Getenv(raftlock.EnvAuthToken),
		DialTimeout: 2 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	defer cli.Close(ctx)
	st, err := cli.Status(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("members:", len(st.Members))
	// Output: members: 3
}

// Connections made from one of the host's addresses, for firewalls or
// per-source rules that must see it.
func ExampleConfig_localAddr() {
	ctx := context.Background()
	cfg := raftlock.ConfigFromEnv()
	cfg.LocalAddr = &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}
	cli, err := raftlock.New(cfg)
	if err != nil {
		panic(err)
	}
	defer cli.Close(ctx)
	_, err = cli.Status(ctx)
	fmt.Println("reachable:", err == nil)
	// Output: reachable: true
}

// FromEnv reads the settings the raftlock CLI reads.
func ExampleFromEnv() {
	ctx := context.Background()
	cli, err := raftlock.FromEnv()
	if err != nil {
		panic(err)
	}
	defer cli.Close(ctx)
	_, err = cli.Status(ctx)
	fmt.Println("reachable:", err == nil)
	// Output: reachable: true
}

// A session is kept alive by the client; Done closes when it can no
// longer be counted on, and Err says why.
func ExampleClient_NewSession() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	s, err := cli.NewSession(ctx, raftlock.WithTTL(5*time.Second), raftlock.WithClientName("billing-worker"))
	if err != nil {
		panic(err)
	}
	defer s.Close(ctx)
	fmt.Println(s.TTL(), s.Valid(), time.Until(s.ValidUntil()) <= 5*time.Second)
	// Output: 5s true true
}

// Stop the work that depends on a session when its Done closes.
func ExampleSession_Done() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	s, _ := cli.NewSession(ctx)
	stopped := make(chan error)
	go func() {
		<-s.Done() // the local deadline passed, the server dropped it, or it was closed
		stopped <- s.Err()
	}()
	_ = s.Close(ctx)
	fmt.Println(errors.Is(<-stopped, raftlock.ErrSessionLost))
	// Output: true
}

// Closing a session releases its locks at once.
func ExampleSession_Close() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	s, _ := cli.NewSession(ctx)
	_ = raftlock.NewMutex(s, "example/closed").Lock(ctx)
	if err := s.Close(ctx); err != nil {
		panic(err)
	}
	info, _ := cli.Describe(ctx, "example/closed")
	fmt.Println("holders after close:", len(info.Holders))
	// Output: holders after close: 0
}

// Observe an election: its leader now and at every change.
func ExampleClient_Observe() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	s, _ := cli.NewSession(ctx)
	e := raftlock.NewElection(s, "example/observed")
	_ = e.Campaign(ctx, "host-1")
	octx, stop := context.WithCancel(ctx)
	defer stop()
	changes := cli.Observe(octx, "example/observed")
	fmt.Println("leader:", string((<-changes).Leader.Metadata))
	_ = e.Resign(ctx)
	fmt.Println("no leader:", (<-changes).Leader == nil)
	// Output:
	// leader: host-1
	// no leader: true
}

// A block of tokens reserved in one write and spent locally.
func ExampleTokenLease() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	rl := cli.RateLimit("example/batch-api", raftlock.RateLimitOptions{Rate: 50, Per: time.Second, Burst: 50})
	lease, err := rl.Reserve(ctx, 20, 2*time.Second)
	if err != nil || lease == nil {
		panic(fmt.Sprint("not reserved: ", err))
	}
	for i := 0; i < 5; i++ {
		if !lease.TrySpend() { // no call to the cluster
			break
		}
	}
	fmt.Println("left:", lease.Left())
	credited, _ := lease.Finish(ctx) // give back the 15 not spent
	fmt.Println("given back:", credited)
	// Output:
	// left: 15
	// given back: 15
}

// Describe shows holders and waiters; Validate checks a fencing token.
func ExampleClient_Validate() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	s, _ := cli.NewSession(ctx)
	m := raftlock.NewMutex(s, "example/validated")
	_ = m.Lock(ctx)
	token := m.Token()
	info, _ := cli.Describe(ctx, "example/validated")
	fmt.Println("holder's token:", info.Holders[0].Token == token)
	valid, _, _ := cli.Validate(ctx, "example/validated", token)
	fmt.Println("valid while held:", valid)
	_ = m.Unlock(ctx)
	valid, _, _ = cli.Validate(ctx, "example/validated", token)
	fmt.Println("valid after unlock:", valid)
	// Output:
	// holder's token: true
	// valid while held: true
	// valid after unlock: false
}

// Two accounts locked together: both are granted in one log entry, or
// neither; each lock keeps its own grant and fencing token.
func ExampleSession_LockAll() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	s, _ := cli.NewSession(ctx)
	wait, cancel := context.WithTimeout(ctx, 10*time.Second) // the wait is given up when it ends
	defer cancel()
	set, err := s.LockAll(wait, []string{"example/accounts/42", "example/accounts/17"})
	if err != nil {
		panic(err)
	}
	for _, m := range set.Mutexes() {
		fmt.Println(m.Name(), m.Token() == set.Token(m.Name()))
	}
	if err := set.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output:
	// example/accounts/17 true
	// example/accounts/42 true
}

// A try on a set refuses it whole when one of its locks is busy.
func ExampleSession_TryLockAll() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	a, _ := cli.NewSession(ctx)
	b, _ := cli.NewSession(ctx)
	_ = raftlock.NewMutex(a, "example/shards/4").Lock(ctx)
	_, err := b.TryLockAll(ctx, []string{"example/shards/3", "example/shards/4"})
	fmt.Println("busy:", errors.Is(err, raftlock.ErrLocked))
	info, _ := cli.Describe(ctx, "example/shards/3")
	fmt.Println("shard 3 holders:", len(info.Holders))
	// Output:
	// busy: true
	// shard 3 holders: 0
}

// Watch the locks under a prefix: each batch is one command's events.
func ExampleClient_Watch() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	w, err := cli.Watch(ctx, "example/watched/")
	if err != nil {
		panic(err)
	}
	defer w.Close()
	s, _ := cli.NewSession(ctx)
	m := raftlock.NewMutex(s, "example/watched/deploy")
	_ = m.Lock(ctx)
	token := m.Token()
	_ = m.Unlock(ctx)
	for i := 0; i < 2; i++ {
		b, err := w.Next(ctx)
		if err != nil {
			panic(err)
		}
		for _, e := range b.Events {
			fmt.Println(e.Kind, e.Name, e.Token == token)
		}
	}
	// Output:
	// granted example/watched/deploy true
	// released example/watched/deploy true
}

// A watch resumed where an earlier one stopped, say by a restarted
// program that saved the index: nothing in between is missed.
func ExampleWatchAfter() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	w, _ := cli.Watch(ctx, "example/resumed/")
	saved := w.Index()
	w.Close()
	s, _ := cli.NewSession(ctx)
	_ = raftlock.NewMutex(s, "example/resumed/job").Lock(ctx) // while nobody watched
	resumed, err := cli.Watch(ctx, "example/resumed/", raftlock.WatchAfter(saved))
	if err != nil {
		panic(err) // ErrWatchCompacted if the cluster no longer remembers that far back
	}
	defer resumed.Close()
	b, _ := resumed.Next(ctx)
	fmt.Println(b.Events[0].Kind, b.Events[0].Name)
	// Output: granted example/resumed/job
}

// Live sessions by client name: who holds and waits for what.
func ExampleClient_ListSessions() {
	ctx := context.Background()
	cli, _ := raftlock.FromEnv()
	defer cli.Close(ctx)
	s, _ := cli.NewSession(ctx, raftlock.WithClientName("example-billing"), raftlock.WithTTL(10*time.Second))
	_ = raftlock.NewMutex(s, "example/invoices").Lock(ctx)
	sessions, err := cli.ListSessions(ctx, "example-billing")
	if err != nil {
		panic(err)
	}
	for _, info := range sessions {
		fmt.Println(info.ID == s.ID(), info.ClientName, info.Held, info.TTL)
	}
	// Output: true example-billing [example/invoices] 10s
}
