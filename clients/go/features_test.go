package raftlock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
	"github.com/raftlock/raftlock/clients/go/internal/testcluster"
)

func TestSharedLocksSemaphoresMetadataAndLockDelay(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	s1, s2, s3 := session(t, cl, 10*time.Second), session(t, cl, 10*time.Second), session(t, cl, 10*time.Second)

	r1 := raftlock.NewMutex(s1, "f/rw", raftlock.WithShared(), raftlock.WithMetadata([]byte("reader-1")))
	r2 := raftlock.NewMutex(s2, "f/rw", raftlock.WithShared())
	if err := r1.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r2.TryLock(ctx); err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	if err := raftlock.NewMutex(s3, "f/rw").TryLock(ctx); !errors.Is(err, raftlock.ErrLocked) {
		t.Fatalf("a writer beside readers: %v", err)
	}
	info, err := cl.Describe(ctx, "f/rw")
	if err != nil || len(info.Holders) != 2 || string(info.Holders[0].Metadata) != "reader-1" || info.Holders[0].Mode != raftlock.Shared {
		t.Fatalf("describe: %+v %v", info, err)
	}

	// A semaphore of 3: two places, then one, then no more.
	two := raftlock.NewMutex(s1, "f/sem", raftlock.WithPermits(3), raftlock.WithCount(2))
	one := raftlock.NewMutex(s2, "f/sem", raftlock.WithPermits(3))
	if err := two.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := one.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if g := two.Grant(); g.Count != 2 {
		t.Fatalf("count %d", g.Count)
	}
	if err := raftlock.NewMutex(s3, "f/sem", raftlock.WithPermits(3)).TryLock(ctx); !errors.Is(err, raftlock.ErrLocked) {
		t.Fatalf("a fourth place: %v", err)
	}
	if err := two.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := raftlock.NewMutex(s3, "f/sem", raftlock.WithPermits(3)).TryLock(ctx); err != nil {
		t.Fatalf("a place freed: %v", err)
	}

	// A size set by Resize rules the semaphore and outlives its holders:
	// held by nobody, it is still listed.
	if _, err := cl.Resize(ctx, "f/sized", 4); err != nil {
		t.Fatal(err)
	}
	// Shrinking below what is held takes nothing away.
	if granted, err := cl.Resize(ctx, "f/sem", 1); err != nil || len(granted) != 0 {
		t.Fatalf("shrinking below the holders: %v %v", granted, err)
	}
	listed, err := cl.List(ctx, "f/s")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range listed {
		names = append(names, fmt.Sprintf("%s:%d:%v:%d", l.Name, l.Permits, l.Resized, len(l.Holders)))
	}
	if got := strings.Join(names, " "); got != "f/sem:1:true:2 f/sized:4:true:0" {
		t.Fatalf("list: %s", got)
	}
	if info, err := cl.Describe(ctx, "f/sized"); err != nil || !info.Resized || info.Permits != 4 {
		t.Fatalf("describe of a sized semaphore nobody holds: %+v %v", info, err)
	}
	if _, err := cl.Resize(ctx, "f/sized", 0); err != nil {
		t.Fatal(err)
	}
	if listed, err := cl.List(ctx, "f/sized"); err != nil || len(listed) != 0 {
		t.Fatalf("a forgotten size is not listed: %+v %v", listed, err)
	}

	// A lock-delay keeps a lock nobody released from everyone for a while.
	held := raftlock.NewMutex(s3, "f/delay", raftlock.WithLockDelay(2*time.Second), raftlock.WithMaxHold(time.Second))
	if err := held.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if g := held.Grant(); g.MaxHold != time.Second || g.LockDelay != 2*time.Second {
		t.Fatalf("grant %+v", g)
	}
	<-held.Lost()
	next := raftlock.NewMutex(s1, "f/delay")
	start := time.Now()
	if err := next.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("granted %v after the cap, inside the lock-delay", waited)
	}
	if next.Token() <= held.Token() && held.Token() != 0 {
		t.Fatalf("tokens %d then %d", held.Token(), next.Token())
	}
}

func TestADowngradedWriterKeepsItsTokenAndLetsTheQueuedReaderIn(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 30*time.Second)
	ws, rs, other := session(t, cl, 10*time.Second), session(t, cl, 10*time.Second), session(t, cl, 10*time.Second)
	w := raftlock.NewMutex(ws, "f/routes")
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	token := w.Token()
	r := raftlock.NewMutex(rs, "f/routes", raftlock.WithShared())
	read := make(chan error, 1)
	go func() { read <- r.Lock(ctx) }()
	for {
		info, err := cl.Describe(ctx, "f/routes")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Waiters) == 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := w.Downgrade(ctx); err != nil {
		t.Fatal(err)
	}
	if g := w.Grant(); g.Token != token || g.Mode != raftlock.Shared {
		t.Fatalf("after the downgrade: %+v, token was %d", g, token)
	}
	select {
	case err := <-read:
		if err != nil {
			t.Fatalf("the reader: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reader was not let in by the downgrade")
	}
	if r.Token() <= token {
		t.Fatalf("reader's token %d not above %d", r.Token(), token)
	}
	if err := raftlock.NewMutex(other, "f/routes").TryLock(ctx); !errors.Is(err, raftlock.ErrLocked) {
		t.Fatalf("a writer beside the readers: %v", err)
	}
	if err := w.Downgrade(ctx); err != nil {
		t.Fatalf("a retried downgrade: %v", err)
	}
	if info, err := cl.Describe(ctx, "f/routes"); err != nil || len(info.Holders) != 2 {
		t.Fatalf("describe: %+v %v", info, err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRateLimitsTakeTryTakeAndReserve(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	rl := cl.RateLimit("f/api", raftlock.RateLimitOptions{Rate: 10, Per: time.Second, Burst: 5})
	created, err := rl.Define(ctx)
	if err != nil || !created {
		t.Fatalf("define: %v %v", created, err)
	}
	if again, err := rl.Define(ctx); err != nil || again {
		t.Fatalf("define again: %v %v", again, err)
	}
	a, err := rl.TryTake(ctx, 5)
	if err != nil || !a.Admitted || a.N != 5 {
		t.Fatalf("the burst: %+v %v", a, err)
	}
	a, err = rl.TryTake(ctx, 1)
	if err != nil || a.Admitted || a.RetryAfter <= 0 {
		t.Fatalf("past the burst: %+v %v", a, err)
	}
	start := time.Now()
	a, err = rl.Take(ctx, 2, 2*time.Second)
	if err != nil || !a.Admitted {
		t.Fatalf("a waiting take: %+v %v", a, err)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Fatal("a take past the burst was admitted without waiting")
	}
	// Four tokens take 400 ms of the rate clock to refill. That clock
	// stands still between leaders, and a fresh cluster may elect again
	// as its last node comes up, so wait for them rather than for a fixed
	// time.
	eventually(t, "four tokens refilled", 10*time.Second, func() bool {
		info, err := rl.Describe(ctx)
		return err == nil && info.Available >= 4
	})
	lease, err := rl.Reserve(ctx, 4, 2*time.Second)
	if err != nil || lease == nil || lease.Reserved() != 4 {
		t.Fatalf("reserve: %+v %v", lease, err)
	}
	if !lease.TrySpend() || lease.Left() != 3 {
		t.Fatal("spending from the lease")
	}
	back, err := lease.Finish(ctx)
	if err != nil || back != 3 {
		t.Fatalf("finish credited %d: %v", back, err)
	}
	if lease.TrySpend() {
		t.Fatal("spent from a finished lease")
	}
	info, err := rl.Describe(ctx)
	if err != nil || info.Rate != 10 || info.Burst != 5 || info.Per != time.Second {
		t.Fatalf("describe: %+v %v", info, err)
	}
	if existed, err := rl.Delete(ctx); err != nil || !existed {
		t.Fatalf("delete: %v %v", existed, err)
	}
}
