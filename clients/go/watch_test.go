package raftlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
	"github.com/raftlock/raftlock/clients/go/internal/testcluster"
)

// next is w's next batch, within d.
func next(t *testing.T, w *raftlock.Watcher, d time.Duration) *raftlock.WatchBatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	b, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("no batch within %v: %v", d, err)
	}
	return b
}

// events is a batch's events as "kind name session token" lines.
func events(b *raftlock.WatchBatch) string {
	var out []string
	for _, e := range b.Events {
		out = append(out, fmt.Sprintf("%s %s %d %d", e.Kind, e.Name, e.SessionID, e.Token))
	}
	return strings.Join(out, "; ")
}

func TestWatchSeesGrantsAndReleasesAndResumesAfterAnIndex(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	s := session(t, cl, 10*time.Second)
	w, err := cl.Watch(ctx, "wt/")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	start := w.Index()
	if start == 0 {
		t.Fatal("an open watch must say the index it starts after")
	}

	m := raftlock.NewMutex(s, "wt/a", raftlock.WithMetadata([]byte("m1")))
	other := raftlock.NewMutex(s, "elsewhere/a")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// Not under the prefix: never seen.
	if err := other.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	token := m.Token()
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	granted := next(t, w, 10*time.Second)
	want := fmt.Sprintf("granted wt/a %d %d", s.ID(), token)
	if events(granted) != want || granted.Index <= start || string(granted.Events[0].Metadata) != "m1" ||
		granted.Events[0].Mode != raftlock.Exclusive || granted.Events[0].Count != 1 {
		t.Fatalf("first batch %q at %d (%+v), want %q after %d", events(granted), granted.Index, granted.Events, want, start)
	}
	if age := time.Since(granted.At); age < -time.Minute || age > time.Minute {
		t.Fatalf("proposed at %v", granted.At)
	}
	released := next(t, w, 10*time.Second)
	if want := fmt.Sprintf("released wt/a %d %d", s.ID(), token); events(released) != want || released.Index <= granted.Index {
		t.Fatalf("second batch %q at %d, want %q after %d", events(released), released.Index, want, granted.Index)
	}
	if w.Index() != released.Index {
		t.Fatalf("index %d after delivering %d", w.Index(), released.Index)
	}

	// Nothing more: Next gives up with its context, and the watch goes on.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = w.Next(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with nothing to deliver: %v", err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if b := next(t, w, 10*time.Second); events(b) != fmt.Sprintf("granted wt/a %d %d", s.ID(), m.Token()) {
		t.Fatalf("after an idle Next: %q", events(b))
	}

	// Resumed after the grant: the release comes first, at its index.
	resumed, err := cl.Watch(ctx, "wt/", raftlock.WatchAfter(granted.Index))
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if resumed.Index() != granted.Index {
		t.Fatalf("resumed watch starts after %d, want %d", resumed.Index(), granted.Index)
	}
	if b := next(t, resumed, 10*time.Second); b.Index != released.Index || events(b) != events(released) {
		t.Fatalf("resumed after %d: %q at %d, want %q at %d", granted.Index, events(b), b.Index, events(released), released.Index)
	}
	// Resumed from the first watch's start: the same batches again.
	again, err := cl.Watch(ctx, "wt/", raftlock.WatchAfter(start))
	if err != nil {
		t.Fatal(err)
	}
	if b := next(t, again, 10*time.Second); b.Index != granted.Index || events(b) != events(granted) {
		t.Fatalf("resumed after %d: %q at %d, want %q at %d", start, events(b), b.Index, events(granted), granted.Index)
	}

	// Closing ends the watch; Next then says so.
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after Close: %v", err)
	}
	// So does the end of the context the watch was opened with.
	wctx, stop := context.WithCancel(ctx)
	scoped, err := cl.Watch(wctx, "wt/")
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := scoped.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after the watch's context ended: %v", err)
	}
	// And closing the client.
	closing := connect(t, c)
	orphan, err := closing.Watch(ctx, "wt/")
	if err != nil {
		t.Fatal(err)
	}
	if err := closing.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := orphan.Next(ctx); !errors.Is(err, raftlock.ErrClientClosed) {
		t.Fatalf("Next after the client closed: %v", err)
	}
	if _, err := closing.Watch(ctx, "wt/"); !errors.Is(err, raftlock.ErrClientClosed) {
		t.Fatalf("Watch on a closed client: %v", err)
	}
}

func TestWatchCarriesOnThroughALeaderKill(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 90*time.Second)
	s := session(t, cl, 10*time.Second)
	// The client knows the leader by now: the watch opens there.
	w, err := cl.Watch(ctx, "wk/")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a := raftlock.NewMutex(s, "wk/a")
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if b := next(t, w, 10*time.Second); events(b) != fmt.Sprintf("granted wk/a %d %d", s.ID(), a.Token()) {
		t.Fatalf("before the kill: %q", events(b))
	}
	leader := c.WaitLeader(10*time.Second, 0)
	c.Kill(leader)
	c.WaitLeader(30*time.Second, leader)
	tokenA := a.Token()
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b := raftlock.NewMutex(s, "wk/b")
	if err := b.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// No gap and nothing twice: exactly the release, then the next grant.
	got := []string{events(next(t, w, 30*time.Second)), events(next(t, w, 30*time.Second))}
	want := []string{fmt.Sprintf("released wk/a %d %d", s.ID(), tokenA), fmt.Sprintf("granted wk/b %d %d", s.ID(), b.Token())}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("after the kill: %q, want %q", got, want)
	}
}

func TestWatchAfterForgottenHistoryFailsWithErrWatchCompacted(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Extra: []string{"--watch-history", "2"}})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	s := session(t, cl, 10*time.Second)
	w, err := cl.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	start := w.Index()
	w.Close()
	m := raftlock.NewMutex(s, "wc/a")
	for i := 0; i < 4; i++ {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err = cl.Watch(ctx, "", raftlock.WatchAfter(start))
	var e *raftlock.Error
	if !errors.Is(err, raftlock.ErrWatchCompacted) || !errors.As(err, &e) || e.Reason != raftlock.ReasonWatchCompacted {
		t.Fatalf("resuming after a forgotten index: %v", err)
	}
	// From now on works.
	fresh, err := cl.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if b := next(t, fresh, 10*time.Second); events(b) != fmt.Sprintf("granted wc/a %d %d", s.ID(), m.Token()) {
		t.Fatalf("a fresh watch: %q", events(b))
	}
}
