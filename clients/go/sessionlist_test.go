package raftlock_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
	"github.com/raftlock/raftlock/clients/go/internal/testcluster"
)

func TestListSessionsShowsWhoHoldsAndWaits(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)
	name := fmt.Sprintf("lister-%d", time.Now().UnixNano())
	holder, err := cl.NewSession(ctx, raftlock.WithTTL(10*time.Second), raftlock.WithClientName(name))
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := cl.NewSession(ctx, raftlock.WithTTL(20*time.Second), raftlock.WithClientName(name+"-w"))
	if err != nil {
		t.Fatal(err)
	}
	// Another name: not listed under this prefix.
	unrelated := session(t, cl, 10*time.Second)
	if err := raftlock.NewMutex(holder, "ls/a").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { _ = raftlock.NewMutex(waiter, "ls/a").Lock(ctx) }()
	eventually(t, "the waiter queued", 10*time.Second, func() bool { return len(waiters(t, cl, "ls/a")) == 1 })

	listed, err := cl.ListSessions(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 || listed[0].ID != holder.ID() || listed[1].ID != waiter.ID() {
		t.Fatalf("listed %+v, want sessions %d and %d in creation order", listed, holder.ID(), waiter.ID())
	}
	host, _ := os.Hostname()
	h, w := listed[0], listed[1]
	if h.ClientName != name || fmt.Sprint(h.Held) != "[ls/a]" || len(h.Waiting) != 0 || h.TTL != 10*time.Second ||
		h.ExpiresIn <= 0 || h.ExpiresIn > 10*time.Second || h.PID != uint32(os.Getpid()) || h.Host != host {
		t.Fatalf("the holder: %+v", h)
	}
	if age := time.Since(h.CreatedAt); age < -time.Minute || age > time.Minute {
		t.Fatalf("created at %v", h.CreatedAt)
	}
	if w.ClientName != name+"-w" || len(w.Held) != 0 || fmt.Sprint(w.Waiting) != "[ls/a]" || w.TTL != 20*time.Second {
		t.Fatalf("the waiter: %+v", w)
	}
	all, err := cl.ListSessions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	found := map[uint64]bool{}
	for _, s := range all {
		found[s.ID] = true
	}
	if !found[holder.ID()] || !found[waiter.ID()] || !found[unrelated.ID()] {
		t.Fatalf("listing every session: %+v", all)
	}

	// A closed session is gone from the list at once.
	if err := holder.Close(ctx); err != nil {
		t.Fatal(err)
	}
	listed, err = cl.ListSessions(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].ID != waiter.ID() {
		t.Fatalf("after closing the holder: %+v", listed)
	}
}
