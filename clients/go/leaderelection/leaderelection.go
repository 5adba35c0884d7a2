// Package leaderelection runs a function only while this process leads a
// raftlock election, in the shape of client-go's
// k8s.io/client-go/tools/leaderelection: RunOrDie with a Config and
// LeaderCallbacks.
//
// Unlike a Kubernetes Lease, leadership here is a Raft-replicated lock
// whose holder is elected in FIFO order with a fencing token, and the
// context handed to OnStartedLeading is cancelled by the session's
// conservative local deadline: it ends before the cluster could give the
// leadership to anyone else, even if this process is paused or cut off.
//
// That context's Err and Done check the deadline whenever they are called,
// so even a process resumed from a pause sees the end at its first look.
// A context derived from it (context.WithCancel and the like) only learns
// of the end when the timer set at the deadline runs, which is the first
// thing the runtime does after the deadline in practice but not a
// guarantee: check the context OnStartedLeading got, IsLeader or
// ValidUntil before an act that must not outlive the leadership, and pass
// Token with the writes.
//
// Closing the Client while leading cancels that context and waits for
// OnStartedLeading to return before the session (and the leadership) is
// given up; if it does not return within Close's context, the session is
// left to expire, which happens only after its local deadline.
package leaderelection

import (
	"context"
	"errors"
	"sync"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
	"github.com/raftlock/raftlock/clients/go/internal/closing"
)

// LeaderCallbacks are called as leadership comes and goes.
type LeaderCallbacks struct {
	// OnStartedLeading runs (in its own goroutine) once this process leads.
	// Its ctx is cancelled when the leadership ends: Run's ctx ended, the
	// Client is being closed, or the session's local deadline passed
	// (before anyone else can be elected). Stop acting as leader when it
	// is done; the leadership is handed over only once it has returned
	// (or the local deadline passed).
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading is called when Run returns, led or not.
	OnStoppedLeading func()
	// OnNewLeader, if set, is called with the identity of every new leader
	// observed, this process included. GetLeader works without it.
	OnNewLeader func(identity string)
}

// Config is a leader election's settings.
type Config struct {
	// Client reaches the cluster; nil: raftlock.FromEnv().
	Client *raftlock.Client
	// Name is the election's name (a lock name).
	Name string
	// Identity is published as the leader's value (unique per candidate).
	Identity string
	// TTL is the session's: how long a dead leader keeps the leadership
	// (default 15 s; client-go's LeaseDuration).
	TTL time.Duration
	// RetryPeriod is the pause before trying again after the cluster
	// failed a call (default 1 s).
	RetryPeriod time.Duration
	// Callbacks are called as leadership comes and goes.
	Callbacks LeaderCallbacks
}

// LeaderElector campaigns in one election.
type LeaderElector struct {
	cfg    Config
	client *raftlock.Client
	own    bool

	mu       sync.Mutex
	leader   string
	isLeader bool
	token    uint64
	session  *raftlock.Session
	err      error
}

// NewLeaderElector checks cfg and makes an elector.
func NewLeaderElector(cfg Config) (*LeaderElector, error) {
	if cfg.Name == "" {
		return nil, errors.New("leaderelection: Name is required")
	}
	if cfg.Identity == "" {
		return nil, errors.New("leaderelection: Identity is required")
	}
	if cfg.Callbacks.OnStartedLeading == nil {
		return nil, errors.New("leaderelection: OnStartedLeading is required")
	}
	if cfg.TTL == 0 {
		cfg.TTL = 15 * time.Second
	}
	if cfg.TTL < time.Second {
		return nil, errors.New("leaderelection: TTL must be at least 1s")
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = time.Second
	}
	le := &LeaderElector{cfg: cfg, client: cfg.Client}
	if le.client == nil {
		c, err := raftlock.FromEnv()
		if err != nil {
			return nil, err
		}
		le.client, le.own = c, true
	}
	return le, nil
}

// RunOrDie runs an election with cfg until ctx ends or the leadership is
// lost; it panics if cfg is invalid.
func RunOrDie(ctx context.Context, cfg Config) {
	le, err := NewLeaderElector(cfg)
	if err != nil {
		panic(err)
	}
	le.Run(ctx)
}

// IsLeader tells whether this process leads now: it won the election and
// the session is within its local deadline, checked when called (so it is
// false at once after a pause past the deadline, before any timer ran).
func (le *LeaderElector) IsLeader() bool {
	le.mu.Lock()
	leading, s := le.isLeader, le.session
	le.mu.Unlock()
	return leading && s != nil && s.Valid()
}

// GetLeader is the identity of the last leader observed ("" if none yet).
func (le *LeaderElector) GetLeader() string {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.leader
}

// Token is the fencing token of the current (or last) leadership: pass it
// with the leader's writes so that a deposed leader's are refused.
func (le *LeaderElector) Token() uint64 {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.token
}

// ValidUntil is the local deadline of the current leadership: until then
// no one else can have been elected, even if no further keep-alive is
// acknowledged. Zero when not leading.
func (le *LeaderElector) ValidUntil() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	if !le.isLeader || le.session == nil {
		return time.Time{}
	}
	return le.session.ValidUntil()
}

// Err is the refusal that made Run give up without leading (no right on
// the name, a bad name), or nil.
func (le *LeaderElector) Err() error {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.err
}

// Run campaigns until this process leads, runs OnStartedLeading, and
// returns when the leadership ends, when ctx ends (once OnStartedLeading
// has returned, then resigning so the successor need not wait out the
// TTL), or when OnStartedLeading returns by itself (resigning too);
// OnStoppedLeading is called as it returns. A session lost while campaigning is replaced; a refusal no
// retry can fix ends Run (see Err).
func (le *LeaderElector) Run(ctx context.Context) {
	defer func() {
		if le.own {
			_ = le.client.Close(context.Background())
		}
		if le.cfg.Callbacks.OnStoppedLeading != nil {
			le.cfg.Callbacks.OnStoppedLeading()
		}
	}()
	octx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	// Always: GetLeader reads what it sees.
	go le.observe(octx)
	for ctx.Err() == nil {
		s, err := le.client.NewSession(ctx, raftlock.WithTTL(le.cfg.TTL), raftlock.WithClientName(le.cfg.Identity))
		if err != nil {
			if !le.again(ctx, err) {
				return
			}
			continue
		}
		el := raftlock.NewElection(s, le.cfg.Name)
		err = el.Campaign(ctx, le.cfg.Identity)
		if err != nil {
			closeQuietly(s)
			if !errors.Is(err, raftlock.ErrSessionLost) && !le.again(ctx, err) {
				return
			}
			continue
		}
		le.lead(ctx, s, el)
		return
	}
}

// again waits a retry period after a failure that a retry may fix; false
// when Run should give up.
func (le *LeaderElector) again(ctx context.Context, err error) bool {
	var e *raftlock.Error
	if ctx.Err() != nil {
		return false
	}
	if errors.As(err, &e) && !e.Retryable() {
		le.mu.Lock()
		le.err = err
		le.mu.Unlock()
		return false
	}
	t := time.NewTimer(le.cfg.RetryPeriod)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// leaderContext is the context OnStartedLeading gets: its Err and Done
// check the session's local deadline when called, so a leader that was
// paused (its timers not yet run) sees the end at its first check rather
// than when the runtime gets round to the timer.
type leaderContext struct {
	context.Context
	s      *raftlock.Session
	cancel context.CancelFunc
}

// Err is the context's error, ending it first if the session is lost.
func (c *leaderContext) Err() error {
	if c.s.Err() != nil {
		c.cancel()
	}
	return c.Context.Err()
}

// Done is the context's channel, closed first if the session is lost.
func (c *leaderContext) Done() <-chan struct{} {
	if c.s.Err() != nil {
		c.cancel()
	}
	return c.Context.Done()
}

// cancelAtDeadline cancels at the session's local deadline, re-armed as
// keep-alives move it, straight from the timer: contexts derived from the
// leader's context see only its cancellation, never the checks of Err and
// Done, so it must come as early as the runtime runs anything after the
// deadline. It returns a function that stops it.
func cancelAtDeadline(s *raftlock.Session, cancel context.CancelFunc) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	var arm func()
	arm = func() {
		t = time.AfterFunc(time.Until(s.ValidUntil()), func() {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				return
			}
			if s.Err() != nil {
				cancel()
				return
			}
			arm()
		})
	}
	mu.Lock()
	arm()
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

func (le *LeaderElector) lead(ctx context.Context, s *raftlock.Session, el *raftlock.Election) {
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	lctx := &leaderContext{Context: inner, s: s, cancel: cancel}
	defer cancelAtDeadline(s, cancel)()
	le.mu.Lock()
	le.isLeader = true
	le.token = el.Token()
	le.session = s
	le.mu.Unlock()
	finished := make(chan struct{})
	// Client.Close stops the leader's work before it closes the session,
	// so that closing the client never hands the leadership over early.
	defer closing.Add(s, func(cctx context.Context) bool {
		cancel()
		select {
		case <-finished:
			return true
		case <-s.Done():
			// Past the local deadline: the work's context has ended.
			return true
		case <-cctx.Done():
			return false
		}
	})()
	go func() {
		defer close(finished)
		le.cfg.Callbacks.OnStartedLeading(lctx)
	}()
	select {
	case <-s.Done():
		// The local deadline passed (or the server dropped the session):
		// the cluster may soon elect someone else.
		cancel()
	case <-ctx.Done():
		cancel()
		// Hand over only once the leader's work has stopped.
		select {
		case <-finished:
		case <-s.Done():
		}
	case <-finished:
		cancel()
	}
	le.mu.Lock()
	le.isLeader = false
	le.mu.Unlock()
	// Resigning (always, as client-go's ReleaseOnCancel) spares the
	// successor the wait for the TTL.
	if s.Err() == nil {
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = el.Resign(rctx)
		_ = s.Close(rctx)
		rcancel()
	}
}

func closeQuietly(s *raftlock.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Close(ctx)
}

func (le *LeaderElector) observe(ctx context.Context) {
	for ctx.Err() == nil {
		for o := range le.client.Observe(ctx, le.cfg.Name) {
			if o.Err != nil || o.Leader == nil {
				continue
			}
			id := string(o.Leader.Metadata)
			le.mu.Lock()
			changed := id != le.leader
			le.leader = id
			le.mu.Unlock()
			if changed && le.cfg.Callbacks.OnNewLeader != nil {
				le.cfg.Callbacks.OnNewLeader(id)
			}
		}
		t := time.NewTimer(le.cfg.RetryPeriod)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}
