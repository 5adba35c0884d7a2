package raftlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
	"github.com/raftlock/raftlock/clients/go/internal/testcluster"
)

func TestElectionThroughALeaderKill(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 90*time.Second)
	ea := raftlock.NewElection(session(t, cl, 10*time.Second), "elect/svc")
	eb := raftlock.NewElection(session(t, cl, 10*time.Second), "elect/svc")
	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := make(chan string, 16)
	obsErr := make(chan error, 1)
	go func() {
		for o := range ea.Observe(octx) {
			if o.Err != nil {
				obsErr <- o.Err
				return
			}
			if o.Leader == nil {
				seen <- ""
			} else {
				seen <- string(o.Leader.Metadata)
			}
		}
	}()
	if err := ea.Campaign(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	// Observe sees a's leadership before the failover, carries on through
	// it (reopened on the new leader node) without showing an error, and
	// sees the value proclaimed after it.
	var got []string
	expect := func(v string) {
		t.Helper()
		for {
			select {
			case s := <-seen:
				if s != "" && (len(got) == 0 || got[len(got)-1] != s) {
					got = append(got, s)
				}
				if s == v {
					return
				}
			case err := <-obsErr:
				t.Fatalf("observe showed an error through the failover: %v", err)
			case <-time.After(20 * time.Second):
				t.Fatalf("observed %v, never %q", got, v)
			}
		}
	}
	expect("node-a")
	won := make(chan error, 1)
	go func() { won <- eb.Campaign(ctx, "node-b") }()
	eventually(t, "b in line", 10*time.Second, func() bool { return len(waiters(t, cl, "elect/svc")) == 1 })
	leader := c.WaitLeader(10*time.Second, 0)
	c.Kill(leader)
	c.WaitLeader(30*time.Second, leader)
	if err := ea.Proclaim(ctx, "node-a2"); err != nil {
		t.Fatal(err)
	}
	g, err := eb.Leader(ctx)
	if err != nil || string(g.Metadata) != "node-a2" || g.Token != ea.Token() {
		t.Fatalf("leader %+v, %v", g, err)
	}
	expect("node-a2")
	aToken := ea.Token()
	if err := ea.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-won:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("b not elected after a's resignation")
	}
	if eb.Token() <= aToken {
		t.Fatalf("term token %d after %d", eb.Token(), aToken)
	}
	expect("node-b")
	if got[0] != "node-a" {
		t.Fatalf("observed %v, first node-a", got)
	}
	if err := ea.Proclaim(ctx, "x"); !errors.Is(err, raftlock.ErrNotLeading) {
		t.Fatalf("proclaim after resigning: %v", err)
	}
}

func TestCancelledCampaignLeavesTheLine(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl := connect(t, c)
	ctx := ctxT(t, 30*time.Second)
	ea := raftlock.NewElection(session(t, cl, 10*time.Second), "elect/c")
	if err := ea.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	eb := raftlock.NewElection(session(t, cl, 10*time.Second), "elect/c")
	// No deadline: the server would keep b in line for MaxWait, so only
	// the cancellation can take it out within the second allowed below.
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- eb.Campaign(cctx, "b") }()
	eventually(t, "b in line", 10*time.Second, func() bool { return len(waiters(t, cl, "elect/c")) == 1 })
	cancel()
	cancelledAt := time.Now()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("campaign: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("a cancelled campaign did not return")
	}
	eventually(t, "b out of line", time.Second-time.Since(cancelledAt), func() bool { return len(waiters(t, cl, "elect/c")) == 0 })
	if _, err := cl.Leader(ctx, "elect/none"); !errors.Is(err, raftlock.ErrNoLeader) {
		t.Fatalf("leader of an empty election: %v", err)
	}
}

func TestObserveEndsWhenTheClientCloses(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	cl, err := raftlock.New(raftlock.Config{Endpoints: c.Clients})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	e := raftlock.NewElection(session(t, cl, 10*time.Second), "elect/close")
	if err := e.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	obs := cl.Observe(context.Background(), "elect/close")
	select {
	case o := <-obs:
		if o.Leader == nil || string(o.Leader.Metadata) != "a" {
			t.Fatalf("first observation %+v", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing observed")
	}
	// A wait in flight is cut by Close too; the lock's holder belongs to
	// another client, so that Close cannot free it for the waiter.
	other := connect(t, c)
	if err := raftlock.NewMutex(session(t, other, 10*time.Second), "elect/close-lock").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiter := raftlock.NewMutex(session(t, cl, 10*time.Second), "elect/close-lock")
	waited := make(chan error, 1)
	go func() { waited <- waiter.Lock(context.Background()) }()
	eventually(t, "waiter queued", 10*time.Second, func() bool { return len(waiters(t, other, "elect/close-lock")) == 1 })
	if err := cl.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	closedAt := time.Now()
	deadline := time.After(time.Second)
	for open := true; open; {
		select {
		case _, open = <-obs:
		case <-deadline:
			t.Fatal("Observe's channel still open a second after Close")
		}
	}
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("a wait cut by Close must fail")
		}
	case <-time.After(time.Second - time.Since(closedAt)):
		t.Fatal("a Lock in flight still waiting a second after Close")
	}
}
