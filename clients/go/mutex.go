package raftlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// MaxWait is the longest single wait the server allows by default (its
// --max-wait-ms); longer waits are waited in turns.
const MaxWait = time.Hour

// maxWait is MaxWait, shortened by tests that cannot wait an hour for a
// second turn.
var maxWait = int64(MaxWait)

func maxWaitTurn() time.Duration { return time.Duration(atomic.LoadInt64(&maxWait)) }

// setMaxWait sets the turn length and returns the previous one.
func setMaxWait(d time.Duration) time.Duration {
	return time.Duration(atomic.SwapInt64(&maxWait, int64(d)))
}

// MutexOption configures NewMutex.
type MutexOption func(*mutexOptions)

type mutexOptions struct {
	shared    bool
	permits   uint32
	count     uint32
	maxHold   time.Duration
	lockDelay time.Duration
	metadata  []byte
	wait      time.Duration
}

// WithShared takes the lock in shared (read) mode: any number of shared
// holders, never beside an exclusive one.
func WithShared() MutexOption { return func(o *mutexOptions) { o.shared = true } }

// WithPermits makes the lock a counting semaphore of n places (implies
// shared). Every acquirer of one semaphore must state the same n.
func WithPermits(n uint32) MutexOption {
	return func(o *mutexOptions) { o.permits = n; o.shared = true }
}

// WithCount takes k places of the semaphore at once (implies shared),
// granted only when that many are free, in FIFO order.
func WithCount(k uint32) MutexOption {
	return func(o *mutexOptions) { o.count = k; o.shared = true }
}

// WithMaxHold caps the hold (1 s to 7 days): the leader releases the lock
// this long after granting it even though the session lives. The Mutex
// counts it lost a safety margin before then, counted from when the
// acquire was first sent (time queued counts too).
func WithMaxHold(d time.Duration) MutexOption { return func(o *mutexOptions) { o.maxHold = d } }

// WithLockDelay sets a lock-delay (exclusive locks, at most 60 s): if the
// hold ends without a release (the session expires, it is force-released,
// its cap runs out), nobody is granted the lock for this long, so that a
// holder that missed its loss has time to stop.
func WithLockDelay(d time.Duration) MutexOption { return func(o *mutexOptions) { o.lockDelay = d } }

// WithWait bounds each Lock's wait on the server: when it runs out without
// the lock, Lock returns an error matching ErrLockTimeout (and
// context.DeadlineExceeded). A wait longer than MaxWait is waited in turns
// to its end. Without it the wait is bounded by the context alone.
func WithWait(d time.Duration) MutexOption { return func(o *mutexOptions) { o.wait = d } }

// WithMetadata stores bytes with the grant, shown by Describe (at most
// 4 KiB).
func WithMetadata(b []byte) MutexOption { return func(o *mutexOptions) { o.metadata = b } }

// Mutex is a named lock taken for a session: exclusive by default, or
// shared, or a place in a counting semaphore. It holds at most one grant
// at a time. Pass Token with every write to the resource it protects, and
// have the resource refuse a token lower than the highest it has seen: a
// holder paused past its lease still believes it holds the lock, and the
// token is what stops its late writes.
type Mutex struct {
	s    *Session
	name string
	o    mutexOptions

	mu       sync.Mutex
	grant    *Grant
	capUntil time.Time
	lost     chan struct{}
	lostErr  error
	// unwatch stops watching the current hold for its loss.
	unwatch func()
}

// NewMutex makes a mutex on lock name for session s; nothing is sent until
// Lock or TryLock.
func NewMutex(s *Session, name string, opts ...MutexOption) *Mutex {
	m := &Mutex{s: s, name: name}
	for _, f := range opts {
		f(&m.o)
	}
	return m
}

// Name is the lock's name.
func (m *Mutex) Name() string { return m.name }

// Session is the session the mutex acquires for.
func (m *Mutex) Session() *Session { return m.s }

// Lock acquires the lock, waiting in its FIFO queue on the server (no
// polling) until it is granted or ctx ends. When ctx ends first, the wait
// is given up on the server at once (the lock goes to the next live
// waiter; a grant that raced the cancellation is released) and Lock
// returns ctx.Err(). A wait the server ends at the context's deadline
// returns an error matching both ErrLockTimeout and
// context.DeadlineExceeded. Without a deadline Lock waits in turns of
// MaxWait for as long as the session lives.
func (m *Mutex) Lock(ctx context.Context) error {
	return waitInTurns(ctx, m.s, m.o.wait, func(ctx context.Context, turn *time.Duration) error {
		return m.acquire(ctx, turn)
	})
}

// waitInTurns runs attempt, one wait on the server of at most the turn it
// is given, until it ends otherwise than by a full turn running out: the
// server bounds each wait by its --max-wait-ms, so a longer one (or one
// bounded by the context alone) is waited as several. wait > 0 bounds the
// whole wait (the server's verdict then ends it); 0 leaves it to ctx.
func waitInTurns(ctx context.Context, s *Session, wait time.Duration, attempt func(ctx context.Context, turn *time.Duration) error) error {
	var end time.Time
	if wait > 0 {
		end = time.Now().Add(wait)
		var cancel context.CancelFunc
		// A little past the server's wait, so that its verdict arrives first.
		ctx, cancel = context.WithTimeout(ctx, wait+s.cl.cfg.RequestTimeout)
		defer cancel()
	}
	for {
		max := maxWaitTurn()
		turn := max
		if !end.IsZero() {
			if left := time.Until(end); left < turn {
				turn = left
			}
		}
		if dl, ok := ctx.Deadline(); ok {
			if left := time.Until(dl); left < turn {
				turn = left
			}
		}
		if turn < 0 {
			turn = 0
		}
		err := attempt(ctx, &turn)
		if err == nil {
			return nil
		}
		// Only a full turn ends short of what was asked; a shorter one was
		// the last.
		more := end.IsZero() || time.Until(end) > time.Millisecond
		if isReason(err, ReasonWaitTimedOut) && turn == max && more && ctx.Err() == nil && s.Valid() {
			continue
		}
		return err
	}
}

// TryLock takes the lock only if it is free now (nobody holds it in the
// way, nobody queues for it, no lock-delay), and returns ErrLocked when it
// is busy. If ctx ends (or the cluster becomes unreachable) while the
// request is out, a grant it may have got is released in the background.
func (m *Mutex) TryLock(ctx context.Context) error {
	return m.acquire(ctx, nil)
}

func (m *Mutex) checkOptions() error {
	if m.o.maxHold < 0 || m.o.lockDelay < 0 || m.o.wait < 0 {
		return invalidArgument("max hold and lock-delay must not be negative")
	}
	return nil
}

// acquire is one acquisition: numbered once and retried as one, with one
// request id, so a retry finds the grant or queue place the first attempt
// got. wait nil is a try-lock.
func (m *Mutex) acquire(ctx context.Context, wait *time.Duration) error {
	if err := m.checkOptions(); err != nil {
		return err
	}
	if err := m.s.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	held := m.grant != nil
	m.mu.Unlock()
	if held {
		return &Error{Reason: ReasonAlreadyHeld, Code: "FAILED_PRECONDITION", Message: fmt.Sprintf("this mutex already holds lock %q", m.name)}
	}
	s := m.s
	if err := s.cancelsSettled(ctx, m.name); err != nil {
		return err
	}
	requestID := newRequestID()
	t := s.ticket()
	defer t.done()
	started := time.Now()
	o := callOpts{}
	if wait != nil {
		o.wait = *wait
	}
	var r struct {
		Acquired bool       `json:"acquired"`
		Grant    *grantJSON `json:"grant"`
	}
	err := s.cl.c.call(ctx, "/v1/lock/acquire", o, func(int) interface{} {
		body := map[string]interface{}{
			"sessionId": str(s.id), "name": m.name, "requestId": b64(requestID), "mode": Exclusive.wire(),
		}
		if m.o.shared {
			body["mode"] = Shared.wire()
		}
		t.fields(body)
		if m.o.permits > 0 {
			body["permits"] = m.o.permits
		}
		if m.o.count > 0 {
			body["count"] = m.o.count
		}
		if m.o.maxHold > 0 {
			body["maxHoldMs"] = ms(m.o.maxHold)
		}
		if m.o.lockDelay > 0 {
			body["lockDelayMs"] = ms(m.o.lockDelay)
		}
		if len(m.o.metadata) > 0 {
			body["metadata"] = b64(m.o.metadata)
		}
		if wait != nil {
			// Each retry waits only what is left, not the whole wait again.
			body["waitTimeoutMs"] = ms(*wait - time.Since(started))
		}
		return body
	}, &r)
	if err != nil {
		s.noteErr(err)
		if undecided(ctx, err) {
			cancelWaitSoon(s, m.name, requestID)
		}
		return err
	}
	if r.Acquired && r.Grant == nil {
		cancelWaitSoon(s, m.name, requestID)
		return &Error{Code: "INTERNAL", Message: fmt.Sprintf("acquire of %q answered granted without a grant", m.name)}
	}
	if !r.Acquired {
		if wait == nil {
			return localError(kindLocked, "FAILED_PRECONDITION", "lock %q is busy", m.name)
		}
		return &Error{Reason: ReasonWaitTimedOut, Code: "DEADLINE_EXCEEDED", Message: fmt.Sprintf("timed out waiting for lock %q", m.name)}
	}
	if err := s.Err(); err != nil {
		// The grant arrived after the session's local deadline (a pause, a
		// slow link): the server may already have expired the session and
		// granted the lock to another, so it is not this caller's to use.
		return err
	}
	m.hold(r.Grant.grant(), started)
	return nil
}

// undecided tells whether an acquire or campaign that failed with err may
// have taken effect on the server all the same: its caller left while it
// was on the wire, the cluster was unreachable after an attempt went out,
// or the answer could not be read. Only a refusal with a verdict settles
// that it did not.
func undecided(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	e, ok := isErr(err)
	if !ok {
		return true
	}
	if e.kind == kindClientClosed {
		// Closing the client closes its sessions, releasing what they hold.
		return false
	}
	if e.Reason != "" && e.Reason != ReasonInternal && !unavailable(e) {
		return false
	}
	return true
}

// cancelWaitSoon gives up, in the background, an acquisition (or
// campaign) whose outcome its caller never learnt: a wait is left, and a
// grant that raced the cancellation (or a try-lock granted while its
// caller left) is released by the server. The server would notice a
// waiter's closed connection too (250 ms later), but this is sooner,
// reaches the leader even if the wait went through another node, and
// covers try-locks, which the server does not track. A cancellation that
// finds nothing may have overtaken its acquire on the way to the leader,
// so one more is sent a little later.
func cancelWaitSoon(s *Session, name string, requestID []byte) {
	cancelWaitsSoon(s, []string{name}, requestID)
}

// cancelWaitsSoon is cancelWaitSoon for a lock set: the server cancels (or
// releases) a whole set by any one of its names, but every name of it
// stays busy for the session until the cancellation ends.
func cancelWaitsSoon(s *Session, names []string, requestID []byte) {
	if !s.Valid() || len(names) == 0 {
		return
	}
	name := names[0]
	ended := make(chan struct{})
	s.mu.Lock()
	if s.cancelling == nil {
		s.cancelling = map[string][]chan struct{}{}
	}
	for _, n := range names {
		s.cancelling[n] = append(s.cancelling[n], ended)
	}
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			for _, n := range names {
				left := s.cancelling[n][:0]
				for _, c := range s.cancelling[n] {
					if c != ended {
						left = append(left, c)
					}
				}
				if len(left) == 0 {
					delete(s.cancelling, n)
				} else {
					s.cancelling[n] = left
				}
			}
			s.mu.Unlock()
			close(ended)
		}()
		for i := 0; i < 2; i++ {
			if i > 0 {
				t := time.NewTimer(500 * time.Millisecond)
				select {
				case <-t.C:
				case <-s.Done():
					t.Stop()
					return
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), s.cl.cfg.RequestTimeout)
			var r struct {
				Cancelled bool `json:"cancelled"`
				Released  bool `json:"released"`
			}
			err := s.cl.c.call(ctx, "/v1/lock/cancel-wait", callOpts{}, func(int) interface{} {
				return map[string]interface{}{"sessionId": str(s.id), "name": name, "requestId": b64(requestID)}
			}, &r)
			cancel()
			// A failure is left to the server: it ends a wait at its
			// deadline, and a session that cannot be reached expires.
			if err != nil || r.Cancelled || r.Released {
				return
			}
		}
	}()
}

// cancelsSettled lets the cancellations of name's abandoned waits finish
// first: a grant that raced its cancellation is the session's until the
// cancellation releases it, and an acquisition sent meanwhile would be
// refused ALREADY_HELD though the caller holds nothing it knows of. Each
// cancellation ends within a second and two request timeouts.
func (s *Session) cancelsSettled(ctx context.Context, name string) error {
	s.mu.Lock()
	pending := append([]chan struct{}(nil), s.cancelling[name]...)
	s.mu.Unlock()
	for _, c := range pending {
		select {
		case <-c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// hold records a grant and watches for its loss: the session's, or the
// hold cap's, counted from sent (the leader counts from its grant, which is
// later) less the same margin as a TTL. The watch is a callback of the
// session and a timer, not a goroutine: a hold costs nothing to watch
// until it is lost.
func (m *Mutex) hold(g *Grant, sent time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.grant = g
	lost := make(chan struct{})
	m.lost = lost
	m.lostErr = nil
	m.capUntil = time.Time{}
	// Set by whichever comes first: the loss or Unlock.
	var settled int32
	var capTimer *time.Timer
	var unwatchSession func()
	stop := func() {
		if capTimer != nil {
			capTimer.Stop()
		}
		if unwatchSession != nil {
			unwatchSession()
		}
	}
	fire := func(why func() error) {
		if !atomic.CompareAndSwapInt32(&settled, 0, 1) {
			return
		}
		// Waits for hold to return, which set the timer and the watch.
		m.mu.Lock()
		if m.lost == lost {
			m.lostErr = why()
		}
		m.mu.Unlock()
		close(lost)
		stop()
	}
	if g.MaxHold > 0 {
		m.capUntil = sent.Add(g.MaxHold - SafetyMargin(g.MaxHold))
		capTimer = time.AfterFunc(time.Until(m.capUntil), func() {
			fire(func() error {
				return localError(kindHoldExpired, "FAILED_PRECONDITION", "lock %q lost: its hold cap of %v ran out", g.Name, g.MaxHold)
			})
		})
	}
	unwatchSession = m.s.watchEnd(func() { fire(m.s.Err) })
	m.unwatch = func() {
		if atomic.CompareAndSwapInt32(&settled, 0, 1) {
			stop()
		}
	}
}

// Token is the fencing token of the current hold (0 when not held).
func (m *Mutex) Token() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grant == nil {
		return 0
	}
	return m.grant.Token
}

// Grant is the current hold as the cluster recorded it, or nil.
func (m *Mutex) Grant() *Grant {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grant == nil {
		return nil
	}
	g := *m.grant
	return &g
}

// Lost is closed when the current hold can no longer be claimed: its
// session was lost or ended, or its hold cap ran out; Err then says why.
// Unlock does not close a channel already returned, but from then on (as
// before any hold) Lost returns a closed channel.
func (m *Mutex) Lost() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lost == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return m.lost
}

// Err is nil while the lock is held and can be claimed, else why not.
func (m *Mutex) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grant == nil {
		return &Error{Reason: ReasonNotHolder, Code: "FAILED_PRECONDITION", Message: fmt.Sprintf("lock %q is not held by this mutex", m.name)}
	}
	if err := m.s.Err(); err != nil {
		return err
	}
	if !m.capUntil.IsZero() && !time.Now().Before(m.capUntil) {
		return localError(kindHoldExpired, "FAILED_PRECONDITION", "lock %q lost: its hold cap of %v ran out", m.name, m.grant.MaxHold)
	}
	return nil
}

// Valid tells whether this client can still claim the lock: held, the
// session within its local deadline, and the hold cap (if any) not run out
// by the same rule.
func (m *Mutex) Valid() bool { return m.Err() == nil }

// ValidUntil is until when the lock can be claimed if no further
// keep-alive is acknowledged: the session's deadline, or the hold cap's if
// that comes first. Zero when not held.
func (m *Mutex) ValidUntil() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grant == nil {
		return time.Time{}
	}
	u := m.s.ValidUntil()
	if !m.capUntil.IsZero() && m.capUntil.Before(u) {
		u = m.capUntil
	}
	return u
}

// Unlock releases the lock; the next waiters are granted in the same log
// entry. After the session ended (which released the lock) it does
// nothing; ErrNotHolder says the lock was taken away (force-released) or
// was not held by this mutex.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	g := m.grant
	capUntil := m.capUntil
	if g == nil {
		m.mu.Unlock()
		return &Error{Reason: ReasonNotHolder, Code: "FAILED_PRECONDITION", Message: fmt.Sprintf("lock %q is not held by this mutex", m.name)}
	}
	m.grant = nil
	m.unwatch()
	// Lost then answers a closed channel, as without a hold; a channel
	// handed out before stays open, since the hold was not lost.
	m.lost = nil
	m.mu.Unlock()
	s := m.s
	// A lost session is not renewed any more: the leader expires it within
	// the safety margin, and its locks with it.
	if s.Err() != nil {
		return nil
	}
	retried := false
	err := s.cl.c.call(ctx, "/v1/lock/release", callOpts{}, func(attempt int) interface{} {
		retried = retried || attempt > 0
		return map[string]interface{}{"sessionId": str(s.id), "name": m.name, "token": str(g.Token)}
	}, nil)
	if err == nil {
		return nil
	}
	// A retry that finds the lock free: an earlier attempt released it and
	// only its answer was lost. Once the hold cap ran out, the leader
	// released it.
	capped := !capUntil.IsZero() && !time.Now().Before(capUntil)
	if isReason(err, ReasonNotHolder) && (retried || capped) {
		return nil
	}
	if isReason(err, ReasonSessionNotFound) {
		s.markGone(err)
		return nil
	}
	return err
}

// Downgrade makes the mutex's exclusive hold shared, as a read-write
// lock's writer becomes a reader without letting go: the token stays the
// same, and the readers queued at the front are granted beside it in the
// same log entry, so no other writer comes between. A hold already shared
// stays so; the hold's lock-delay is dropped (it protects exclusive holds
// only). ErrNotHolder says the mutex holds nothing.
//
//	m := raftlock.NewMutex(s, "config/routes")
//	if err := m.Lock(ctx); err != nil { ... }
//	writeRoutes(m.Token())
//	if err := m.Downgrade(ctx); err != nil { ... } // m.Grant().Mode == raftlock.Shared
func (m *Mutex) Downgrade(ctx context.Context) error {
	m.mu.Lock()
	g := m.grant
	m.mu.Unlock()
	if g == nil {
		return &Error{Reason: ReasonNotHolder, Code: "FAILED_PRECONDITION", Message: fmt.Sprintf("lock %q is not held by this mutex", m.name)}
	}
	s := m.s
	var r struct {
		Hold *grantJSON `json:"hold"`
	}
	err := s.cl.c.call(ctx, "/v1/lock/downgrade", callOpts{}, func(int) interface{} {
		return map[string]interface{}{"sessionId": str(s.id), "name": m.name, "token": str(g.Token)}
	}, &r)
	if err != nil {
		s.noteErr(err)
		return err
	}
	if r.Hold != nil {
		m.mu.Lock()
		if m.grant != nil && m.grant.Token == g.Token {
			m.grant = r.Hold.grant()
		}
		m.mu.Unlock()
	}
	return nil
}

// Release releases the hold of lock name that this session has under
// token, whichever handle acquired it: the same call as Mutex.Unlock, for
// a grant known only by its token. ErrStaleToken says the session holds
// the lock under another token; ErrNotHolder that it does not hold it.
func (s *Session) Release(ctx context.Context, name string, token uint64) error {
	if err := s.Err(); err != nil {
		return err
	}
	err := s.cl.c.call(ctx, "/v1/lock/release", callOpts{}, func(int) interface{} {
		return map[string]interface{}{"sessionId": str(s.id), "name": name, "token": str(token)}
	}, nil)
	s.noteErr(err)
	return err
}
