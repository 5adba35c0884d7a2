package raftlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
	"github.com/raftlock/raftlock/clients/go/internal/testcluster"
)

// describeHeld checks that lock name is held by exactly the sessions
// given, with no waiter, and returns its holders' tokens.
func describeHeld(t *testing.T, cl *raftlock.Client, name string, sessions ...uint64) []uint64 {
	t.Helper()
	info, err := cl.Describe(ctxT(t, 10*time.Second), name)
	if err != nil {
		t.Fatal(err)
	}
	var got, tokens []uint64
	for _, g := range info.Holders {
		got = append(got, g.SessionID)
		tokens = append(tokens, g.Token)
	}
	if fmt.Sprint(got) != fmt.Sprint(sessions) || len(info.Waiters) != 0 {
		t.Fatalf("%s: held by %v with %d waiters, want held by %v and no waiter", name, got, len(info.Waiters), sessions)
	}
	return tokens
}

func TestLockAllGrantsTheWholeSetAtOnce(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	s := session(t, cl, 10*time.Second)
	before := raftlock.NewMutex(s, "set/b")
	if err := before.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	earlier := before.Token()
	if err := before.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// Any order, repeats counted once: granted in name order.
	set, err := s.LockAll(ctx, []string{"set/c", "set/a", "set/b", "set/a"}, raftlock.WithMetadata([]byte("transfer 8812")))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Names(), " "); got != "set/a set/b set/c" {
		t.Fatalf("names %q", got)
	}
	if !set.Valid() {
		t.Fatalf("a set just granted is not valid: %v", set.Err())
	}
	tokens := set.Tokens()
	if len(tokens) != 3 || len(set.Grants()) != 3 {
		t.Fatalf("tokens %v, grants %+v", tokens, set.Grants())
	}
	for i, m := range set.Mutexes() {
		g := m.Grant()
		if g == nil || g.SessionID != s.ID() || string(g.Metadata) != "transfer 8812" || g.Mode != raftlock.Exclusive {
			t.Fatalf("grant of %s: %+v", m.Name(), g)
		}
		// Each lock has a grant of its own, all from the one log entry
		// that granted the set: its index is every grant's token.
		if m.Token() == 0 || m.Token() != set.Token(m.Name()) || m.Token() != set.Mutexes()[0].Token() {
			t.Fatalf("lock %d (%s): token %d, set's tokens %v", i, m.Name(), m.Token(), tokens)
		}
		if got := describeHeld(t, cl, m.Name(), s.ID()); got[0] != m.Token() {
			t.Fatalf("%s: the cluster records token %d, the set %d", m.Name(), got[0], m.Token())
		}
		if valid, _, err := cl.Validate(ctx, m.Name(), m.Token()); err != nil || !valid {
			t.Fatalf("validate %s: %v %v", m.Name(), valid, err)
		}
	}
	if set.Token("set/b") <= earlier {
		t.Fatalf("token %d after %d", set.Token("set/b"), earlier)
	}

	// Released lock by lock: one first, then the rest.
	if err := set.Mutexes()[1].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	describeHeld(t, cl, "set/b")
	if !errors.Is(set.Err(), raftlock.ErrNotHolder) {
		t.Fatalf("a set missing a lock: %v", set.Err())
	}
	if err := set.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"set/a", "set/b", "set/c"} {
		describeHeld(t, cl, n)
	}
	if err := set.Unlock(ctx); !errors.Is(err, raftlock.ErrNotHolder) {
		t.Fatalf("unlocking a released set: %v", err)
	}
	if len(set.Tokens()) != 0 {
		t.Fatalf("a released set claims tokens %v", set.Tokens())
	}

	// A set is exclusive, with no cap or delay.
	if _, err := s.LockAll(ctx, []string{"set/x", "set/y"}, raftlock.WithShared()); !errors.Is(err, raftlock.ErrInvalidArgument) {
		t.Fatalf("a shared set: %v", err)
	}
	if _, err := s.TryLockAll(ctx, nil); !errors.Is(err, raftlock.ErrInvalidArgument) {
		t.Fatalf("an empty set: %v", err)
	}
}

func TestTryLockAllOnABusySetHoldsNothing(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	sa, sb := session(t, cl, 10*time.Second), session(t, cl, 10*time.Second)
	holder := raftlock.NewMutex(sa, "try/b")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	set, err := sb.TryLockAll(ctx, []string{"try/a", "try/b"})
	if !errors.Is(err, raftlock.ErrLocked) || set != nil {
		t.Fatalf("a try on a busy set: %v %v", set, err)
	}
	// Refused whole: the free lock was not taken, and nothing queued.
	describeHeld(t, cl, "try/a")
	describeHeld(t, cl, "try/b", sa.ID())
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	set, err = sb.TryLockAll(ctx, []string{"try/a", "try/b"})
	if err != nil {
		t.Fatalf("a try on a free set: %v", err)
	}
	describeHeld(t, cl, "try/a", sb.ID())
	describeHeld(t, cl, "try/b", sb.ID())
	if err := set.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLockAllWaitsInEveryQueueUntilTheBlockerReleases(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	sa, sb := session(t, cl, 10*time.Second), session(t, cl, 10*time.Second)
	holder := raftlock.NewMutex(sa, "wait/b")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	type result struct {
		set *raftlock.LockSet
		err error
	}
	got := make(chan result, 1)
	go func() {
		set, err := sb.LockAll(ctx, []string{"wait/b", "wait/a"})
		got <- result{set, err}
	}()
	queued := func(name string) bool {
		w := waiters(t, cl, name)
		return len(w) == 1 && w[0] == sb.ID()
	}
	eventually(t, "the set queued on both locks", 10*time.Second, func() bool { return queued("wait/a") && queued("wait/b") })
	// The free lock is not granted on its own while the other is busy.
	if h := holders(t, cl, "wait/a"); len(h) != 0 {
		t.Fatalf("wait/a held by %v while the set waits", h)
	}
	select {
	case r := <-got:
		t.Fatalf("the set returned while a lock of it was held: %v", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	// A bounded wait behind it times out and leaves its queues.
	sc := session(t, cl, 10*time.Second)
	if set, err := sc.LockAll(ctx, []string{"wait/a", "wait/b"}, raftlock.WithWait(300*time.Millisecond)); !errors.Is(err, raftlock.ErrLockTimeout) || set != nil {
		t.Fatalf("a bounded wait for a busy set: %v %v", set, err)
	}
	eventually(t, "the timed-out set gone from the queues", 2*time.Second, func() bool { return queued("wait/a") && queued("wait/b") })
	blocker := holder.Token()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the set was not granted once the blocker released")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.set.Token("wait/a") == 0 || r.set.Token("wait/b") <= blocker {
		t.Fatalf("tokens %v after the blocker's %d", r.set.Tokens(), blocker)
	}
	describeHeld(t, cl, "wait/a", sb.ID())
	describeHeld(t, cl, "wait/b", sb.ID())
	if err := r.set.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCancelledLockAllLeavesNothingHeld(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	sa, sb := session(t, cl, 10*time.Second), session(t, cl, 10*time.Second)
	holder := raftlock.NewMutex(sa, "cx/b")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		set, err := sb.LockAll(wctx, []string{"cx/a", "cx/b"})
		if set != nil {
			err = fmt.Errorf("granted a set %v after all", set.Names())
		}
		got <- err
	}()
	eventually(t, "the set queued", 10*time.Second, func() bool { return len(waiters(t, cl, "cx/a")) == 1 })
	cancel()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled LockAll: %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a cancelled LockAll did not return")
	}
	eventually(t, "the set gone from both queues", 2*time.Second, func() bool {
		return len(waiters(t, cl, "cx/a")) == 0 && len(waiters(t, cl, "cx/b")) == 0
	})
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Had the set stayed queued, the release would have handed it both.
	describeHeld(t, cl, "cx/a")
	describeHeld(t, cl, "cx/b")
	set, err := sb.TryLockAll(ctx, []string{"cx/a", "cx/b"})
	if err != nil {
		t.Fatalf("the same session taking the set after its cancel: %v", err)
	}
	if err := set.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// The blocker releases at the moment the set's waiter gives up: whichever
// wins, no lock of the set stays with the waiter that left, and its
// session can take the set again at once.
func TestLockAllGrantRacingACancelIsGivenBack(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 120*time.Second)
	sa, sb := session(t, cl, 10*time.Second), session(t, cl, 10*time.Second)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	won, left := 0, 0
	for i := 0; i < 12; i++ {
		names := []string{fmt.Sprintf("setrace/%d/a", i), fmt.Sprintf("setrace/%d/b", i)}
		holder := raftlock.NewMutex(sa, names[1])
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		type result struct {
			set *raftlock.LockSet
			err error
		}
		got := make(chan result, 1)
		go func() {
			set, err := sb.LockAll(wctx, names)
			got <- result{set, err}
		}()
		eventually(t, "the set queued", 10*time.Second, func() bool { return len(waiters(t, cl, names[0])) == 1 })
		unlocked := make(chan error, 1)
		skew := time.Duration(rng.Intn(6000)) * time.Microsecond
		go func() { time.Sleep(skew); unlocked <- holder.Unlock(ctx) }()
		time.Sleep(3 * time.Millisecond)
		cancel()
		if err := <-unlocked; err != nil {
			t.Fatal(err)
		}
		var r result
		select {
		case r = <-got:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: a cancelled LockAll did not return", i)
		}
		if r.err == nil {
			won++
			if err := r.set.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("round %d: %v", i, r.err)
		}
		left++
		// Either lock alone, as the set, waits for the cancel to give a
		// raced grant back rather than being refused ALREADY_HELD.
		single := raftlock.NewMutex(sb, names[1])
		if err := single.TryLock(ctx); err != nil {
			t.Fatalf("round %d: taking %s right after the cancel: %v", i, names[1], err)
		}
		if err := single.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		again, err := sb.TryLockAll(ctx, names)
		if err != nil {
			t.Fatalf("round %d: taking the set again right after the cancel: %v", i, err)
		}
		if err := again.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the waiter that left holds nothing", time.Second, func() bool {
			return !heldBy(holders(t, cl, names[0]), sb.ID()) && !heldBy(holders(t, cl, names[1]), sb.ID())
		})
	}
	t.Logf("granted before the cancel: %d, cancelled: %d", won, left)
}
