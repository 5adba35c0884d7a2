package raftlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
	"github.com/raftlock/raftlock/clients/go/internal/testcluster"
)

func TestMutualExclusionAcrossProcessesWithIncreasingTokens(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	out := filepath.Join(t.TempDir(), "holds")
	a := spawnHelper(t, c, "mutex:12", "mx/a", out)
	b := spawnHelper(t, c, "mutex:12", "mx/a", out)
	if err := a.Wait(); err != nil {
		t.Fatalf("helper a: %v", err)
	}
	if err := b.Wait(); err != nil {
		t.Fatalf("helper b: %v", err)
	}
	type hold struct{ token, start, end int64 }
	var holds []hold
	for _, l := range readLines(t, out) {
		holds = append(holds, hold{num(t, l[1]), num(t, l[2]), num(t, l[3])})
	}
	if len(holds) != 24 {
		t.Fatalf("%d holds recorded, want 24", len(holds))
	}
	sort.Slice(holds, func(i, j int) bool { return holds[i].start < holds[j].start })
	for i := 1; i < len(holds); i++ {
		if holds[i].token <= holds[i-1].token {
			t.Fatalf("token %d granted after %d", holds[i].token, holds[i-1].token)
		}
		if holds[i].start < holds[i-1].end {
			t.Fatalf("holds overlap: %+v and %+v", holds[i-1], holds[i])
		}
	}
}

func TestFIFOHandoff(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	holder := raftlock.NewMutex(session(t, cl, 10*time.Second), "fifo/a")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	type result struct {
		i     int
		token uint64
		m     *raftlock.Mutex
	}
	granted := make(chan result, 3)
	var ids []uint64
	for i := 0; i < 3; i++ {
		s := session(t, cl, 10*time.Second)
		ids = append(ids, s.ID())
		m := raftlock.NewMutex(s, "fifo/a")
		go func(i int) {
			if err := m.Lock(ctx); err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			granted <- result{i, m.Token(), m}
		}(i)
		// Queue them one after the other.
		eventually(t, "waiter queued", 10*time.Second, func() bool { return len(waiters(t, cl, "fifo/a")) == i+1 })
	}
	if got := waiters(t, cl, "fifo/a"); len(got) != 3 || got[0] != ids[0] || got[1] != ids[1] || got[2] != ids[2] {
		t.Fatalf("queue %v, want %v", got, ids)
	}
	last := holder.Token()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for want := 0; want < 3; want++ {
		select {
		case r := <-granted:
			if r.i != want {
				t.Fatalf("waiter %d granted, want %d", r.i, want)
			}
			if r.token <= last {
				t.Fatalf("token %d after %d", r.token, last)
			}
			last = r.token
			if err := r.m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d not granted", want)
		}
	}
}

func TestCancelledLockLeavesTheQueueAndTheNextWaiterGetsIt(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	holder := raftlock.NewMutex(session(t, cl, 10*time.Second), "cancel/a")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	sb, sc := session(t, cl, 10*time.Second), session(t, cl, 10*time.Second)
	b, cm := raftlock.NewMutex(sb, "cancel/a"), raftlock.NewMutex(sc, "cancel/a")
	bctx, cancelB := context.WithCancel(ctx)
	bErr := make(chan error, 1)
	go func() { bErr <- b.Lock(bctx) }()
	eventually(t, "b queued", 10*time.Second, func() bool { return len(waiters(t, cl, "cancel/a")) == 1 })
	cGot := make(chan error, 1)
	go func() { cGot <- cm.Lock(ctx) }()
	eventually(t, "c queued", 10*time.Second, func() bool { return len(waiters(t, cl, "cancel/a")) == 2 })

	cancelB()
	select {
	case err := <-bErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("b's Lock: %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a cancelled Lock did not return")
	}
	eventually(t, "b gone from the queue", 2*time.Second, func() bool {
		w := waiters(t, cl, "cancel/a")
		return len(w) == 1 && w[0] == sc.ID()
	})
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cGot:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next live waiter was not granted")
	}
	info, err := cl.Describe(ctx, "cancel/a")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders) != 1 || info.Holders[0].SessionID != sc.ID() || len(info.Waiters) != 0 {
		t.Fatalf("after the handoff: %+v", info)
	}
	if b.Token() != 0 {
		t.Fatal("the cancelled mutex claims a token")
	}
}

func TestPausedHolderSeesLostBeforeTheNextGrant(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	out := filepath.Join(t.TempDir(), "holder")
	p := spawnHelper(t, c, "hold", "pause/a", out)
	eventually(t, "the holder ticks", 20*time.Second, func() bool {
		for _, l := range readLines(t, out) {
			if l[0] == "tick" {
				return true
			}
		}
		return false
	})
	if err := p.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now().UnixNano()
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	m := raftlock.NewMutex(session(t, cl, 10*time.Second), "pause/a")
	if err := m.Lock(ctx); err != nil {
		_ = p.Process.Signal(syscall.SIGCONT)
		t.Fatal(err)
	}
	grantedAt := time.Now().UnixNano()
	if err := p.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	if grantedAt < pausedAt+int64(time.Second) {
		t.Fatalf("granted %v after the pause, within the paused holder's TTL", time.Duration(grantedAt-pausedAt))
	}
	var lastValidDeadline int64
	var lastValid bool
	lost := false
	for _, l := range readLines(t, out) {
		switch l[0] {
		case "tick":
			lastValid = l[2] == "1"
			if lastValid {
				if at := num(t, l[1]); at >= grantedAt {
					t.Fatalf("the holder said valid at %d, after the grant at %d", at, grantedAt)
				}
				lastValidDeadline = num(t, l[3])
			}
		case "lost":
			lost = l[2] == "true"
		}
	}
	if lastValidDeadline == 0 || lastValidDeadline > grantedAt {
		t.Fatalf("the holder counted on the lock until %d, the next grant was at %d", lastValidDeadline, grantedAt)
	}
	if lastValid || !lost {
		t.Fatalf("after the pause the holder must see Lost closed with ErrSessionLost: %v", readLines(t, out))
	}
}

func TestLeaderKillDuringALockWait(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 90*time.Second)
	a := raftlock.NewMutex(session(t, cl, 10*time.Second), "kill/wait")
	sb := session(t, cl, 10*time.Second)
	b := raftlock.NewMutex(sb, "kill/wait")
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx) }()
	eventually(t, "b queued", 10*time.Second, func() bool { return len(waiters(t, cl, "kill/wait")) == 1 })
	leader := c.WaitLeader(10*time.Second, 0)
	c.Kill(leader)
	c.WaitLeader(30*time.Second, leader)
	aToken := a.Token()
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter was not granted after the failover")
	}
	if b.Token() <= aToken {
		t.Fatalf("token %d after %d", b.Token(), aToken)
	}
	valid, current, err := cl.Validate(ctx, "kill/wait", b.Token())
	if err != nil || !valid || current != b.Token() {
		t.Fatalf("validate: %v %v %v", valid, current, err)
	}
	info, err := cl.Describe(ctx, "kill/wait")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders) != 1 || info.Holders[0].SessionID != sb.ID() || len(info.Waiters) != 0 {
		t.Fatalf("granted once, to b: %+v", info)
	}
	if !sb.Valid() {
		t.Fatal("the session must survive a failover well inside its TTL")
	}
}

// holders lists the sessions holding lock name.
func holders(t *testing.T, cl *raftlock.Client, name string) []uint64 {
	t.Helper()
	info, err := cl.Describe(ctxT(t, 10*time.Second), name)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, g := range info.Holders {
		ids = append(ids, g.SessionID)
	}
	return ids
}

func heldBy(ids []uint64, id uint64) bool {
	for _, h := range ids {
		if h == id {
			return true
		}
	}
	return false
}

// A try-lock whose context ends while it is on the wire may have been
// granted all the same; the client must give that grant back.
func TestCancelledTryLocksLeaveNothingHeld(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	s := session(t, cl, 10*time.Second)
	// Warm the connection to the leader, so that the delays below fall
	// inside the acquire's round trip.
	if err := raftlock.NewMutex(s, "trycancel/warm").TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	const n = 40
	cancelled := 0
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("trycancel/%d", i)
		m := raftlock.NewMutex(s, name)
		tctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(time.Duration(rng.Intn(8000))*time.Microsecond, cancel)
		err := m.TryLock(tctx)
		cancel()
		if err == nil {
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("try-lock %d: %v", i, err)
		}
		cancelled++
		// Whether or not it was granted, the same session can take the
		// lock again at once: the give-back finishes first.
		if err := m.TryLock(ctx); err != nil {
			t.Fatalf("try-lock %d again right after its cancel: %v", i, err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of %d try-locks cancelled", cancelled, n)
	eventually(t, "no cancelled try-lock left holding", 2*time.Second, func() bool {
		for i := 0; i < n; i++ {
			if heldBy(holders(t, cl, fmt.Sprintf("trycancel/%d", i)), s.ID()) {
				return false
			}
		}
		return true
	})
}

// The holder releases at the moment the waiter gives up: whichever wins,
// the lock must not stay with the waiter that left, and its session can
// lock again at once.
func TestGrantRacingACancelIsGivenBack(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 120*time.Second)
	sa, sb := session(t, cl, 10*time.Second), session(t, cl, 10*time.Second)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	won, left := 0, 0
	for i := 0; i < 25; i++ {
		name := fmt.Sprintf("race/%d", i)
		holder, waiter := raftlock.NewMutex(sa, name), raftlock.NewMutex(sb, name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(wctx) }()
		eventually(t, "waiter queued", 10*time.Second, func() bool { return len(waiters(t, cl, name)) == 1 })
		unlocked := make(chan error, 1)
		skew := time.Duration(rng.Intn(6000)) * time.Microsecond
		go func() { time.Sleep(skew); unlocked <- holder.Unlock(ctx) }()
		time.Sleep(3 * time.Millisecond)
		cancel()
		if err := <-unlocked; err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-got:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: a cancelled Lock did not return", i)
		}
		if err == nil {
			won++
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		left++
		if waiter.Token() != 0 {
			t.Fatalf("round %d: the cancelled mutex claims a token", i)
		}
		// The same session locking again at once waits for the cancel to
		// give the raced grant back, rather than being refused
		// ALREADY_HELD for a hold its caller never saw.
		again := raftlock.NewMutex(sb, name)
		if err := again.TryLock(ctx); err != nil {
			t.Fatalf("round %d: locking again right after the cancel: %v", i, err)
		}
		if err := again.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the waiter that left holds nothing", time.Second, func() bool {
			return !heldBy(holders(t, cl, name), sb.ID()) && len(waiters(t, cl, name)) == 0
		})
	}
	t.Logf("granted before the cancel: %d, cancelled: %d", won, left)
}

func TestLostAfterUnlockIsClosed(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 30*time.Second)
	m := raftlock.NewMutex(session(t, cl, 10*time.Second), "lost/unlock")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Lost():
		t.Fatal("Lost closed while held")
	default:
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Lost():
	case <-time.After(time.Second):
		t.Fatal("Lost without a hold must be a closed channel")
	}
	if !errors.Is(m.Err(), raftlock.ErrNotHolder) {
		t.Fatalf("err after unlock: %v", m.Err())
	}
}
