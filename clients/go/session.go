package raftlock

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"
)

// SafetyMargin is the part of a TTL this client does not count on: a
// tenth, at least 100 ms. It covers the leader's and the client's clocks
// running at slightly different rates, and scheduling delays.
func SafetyMargin(ttl time.Duration) time.Duration {
	m := ttl / 10
	if m < 100*time.Millisecond {
		m = 100 * time.Millisecond
	}
	return m
}

// SessionOption configures NewSession.
type SessionOption func(*sessionOptions)

type sessionOptions struct {
	ttl  time.Duration
	name string
}

// WithTTL sets the session's time to live without keep-alives (default
// 10 s; the cluster allows 1 s to 10 min by default).
func WithTTL(ttl time.Duration) SessionOption {
	return func(o *sessionOptions) { o.ttl = ttl }
}

// WithClientName sets the name describe and server logs show for the
// session (default: the client's).
func WithClientName(name string) SessionOption {
	return func(o *sessionOptions) { o.name = name }
}

// Session is a lease on the cluster that owns locks, waits and
// leaderships. The client keeps it alive every TTL/3 and counts it valid
// only until the send time of its last acknowledged keep-alive + TTL −
// SafetyMargin(TTL): the leader counts the TTL from when it received that
// keep-alive, which is later, so before this deadline it cannot have
// expired the session. Past it, or when the server says the session is
// gone, the session is lost for good and Done is closed. Everything it
// holds is released when it ends.
type Session struct {
	cl  *Client
	id  uint64
	ttl time.Duration

	mu      sync.Mutex
	until   time.Time
	ended   *Error
	done    chan struct{}
	timer   *time.Timer
	seq     uint64
	waiting map[uint64]struct{}
	closing bool
	// onEnd is called (each in a goroutine of its own) when the session
	// ends: how a hold learns of the loss without a goroutine per hold.
	onEnd     map[uint64]func()
	lastWatch uint64
	// cancelling holds, by lock name, the abandoned waits whose
	// cancellation is still on its way; each channel closes when it ends.
	cancelling map[string][]chan struct{}

	// Keep-alive state, guarded by the keeper's lock.
	due      time.Time
	inflight bool
	backoff  time.Duration
}

// NewSession creates a session and keeps it alive until it is closed, lost,
// or the client closes. A retried creation reuses one creation key, so a
// lost answer never leaves a second, orphaned session behind.
func (cl *Client) NewSession(ctx context.Context, opts ...SessionOption) (*Session, error) {
	if err := cl.checkOpen(); err != nil {
		return nil, err
	}
	o := sessionOptions{ttl: 10 * time.Second, name: cl.cfg.ClientName}
	for _, f := range opts {
		f(&o)
	}
	if o.ttl < time.Millisecond {
		return nil, &Error{Reason: ReasonTTLOutOfRange, Code: "INVALID_ARGUMENT", Message: fmt.Sprintf("the TTL must be at least 1 ms, got %v", o.ttl)}
	}
	key := newRequestID()
	host, _ := os.Hostname()
	if len(host) > 256 {
		host = host[:256]
	}
	// The first attempt's send time: the leader counts the lease from when
	// it applied the creation, which is no earlier.
	sent := time.Now()
	var r struct {
		SessionID u64 `json:"sessionId"`
		TTLMs     u64 `json:"ttlMs"`
	}
	err := cl.c.call(ctx, "/v1/session/create", callOpts{}, func(int) interface{} {
		return map[string]interface{}{
			"ttlMs": ms(o.ttl), "clientName": o.name, "creationKey": b64(key),
			"host": host, "pid": os.Getpid(),
		}
	}, &r)
	if err != nil {
		return nil, err
	}
	ttl := o.ttl
	if r.TTLMs > 0 {
		ttl = time.Duration(r.TTLMs) * time.Millisecond
	}
	s := &Session{cl: cl, id: uint64(r.SessionID), ttl: ttl, done: make(chan struct{}), waiting: map[uint64]struct{}{}}
	s.until = sent.Add(ttl - SafetyMargin(ttl))
	s.mu.Lock()
	s.arm()
	s.mu.Unlock()
	if cl.checkOpen() != nil {
		s.end(errClosed())
		return s, nil
	}
	cl.keep.add(s, sent.Add(ttl/3))
	return s, nil
}

// ID is the session id (from the log entry that created it; never reused).
func (s *Session) ID() uint64 { return s.id }

// TTL is the TTL the server granted.
func (s *Session) TTL() time.Duration { return s.ttl }

// Client is the client the session was created by.
func (s *Session) Client() *Client { return s.cl }

// Done is closed when the session is lost or ended: its local deadline
// passed, the server says it is gone, or it was closed. Err then says why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is nil while the session counts as valid, else why it does not (an
// error matching ErrSessionLost).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkDeadline()
	if s.ended == nil {
		return nil
	}
	return s.ended
}

// Valid tells whether the session still counts as alive here.
func (s *Session) Valid() bool { return s.Err() == nil }

// ValidUntil is the local validity deadline: until then the leader cannot
// have expired the session. It moves forward with every acknowledged
// keep-alive; once passed, the session is lost.
func (s *Session) ValidUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until
}

// Close ends the session on the server: its locks are released and its
// waits cancelled at once. Closing twice, or a session the server already
// ended, does nothing.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	already := s.closing
	s.closing = true
	s.mu.Unlock()
	if already {
		return nil
	}
	s.end(localError(kindSessionLost, "NOT_FOUND", "session %d closed", s.id))
	err := s.cl.c.call(ctx, "/v1/session/close", callOpts{}, func(int) interface{} {
		return map[string]interface{}{"sessionId": str(s.id)}
	}, nil)
	if err != nil && isReason(err, ReasonSessionNotFound) {
		// Already gone: expired, or an earlier attempt closed it.
		return nil
	}
	return err
}

func isReason(err error, r string) bool {
	e, ok := isErr(err)
	return ok && e.Reason == r
}

// end ends the lease for reason (the first reason wins).
func (s *Session) end(reason *Error) {
	s.mu.Lock()
	if s.ended != nil {
		s.mu.Unlock()
		return
	}
	s.ended = reason
	if s.timer != nil {
		s.timer.Stop()
	}
	close(s.done)
	s.runOnEnd()
	s.mu.Unlock()
	s.cl.keep.remove(s)
}

// checkDeadline ends the lease if its deadline passed; s.mu held.
func (s *Session) checkDeadline() {
	if s.ended == nil && !time.Now().Before(s.until) {
		s.ended = localError(kindSessionLost, "FAILED_PRECONDITION",
			"session %d lost: no keep-alive acknowledged within its TTL minus the safety margin", s.id)
		if s.timer != nil {
			s.timer.Stop()
		}
		close(s.done)
		s.runOnEnd()
		go s.cl.keep.remove(s)
	}
}

// runOnEnd starts what watches the session's end; s.mu held, so each runs
// in a goroutine of its own (they read the session).
func (s *Session) runOnEnd() {
	for _, f := range s.onEnd {
		go f()
	}
	s.onEnd = nil
}

// watchEnd has f called once the session ends (at once if it has); call
// the function returned to stop watching.
func (s *Session) watchEnd(f func()) (unwatch func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkDeadline()
	if s.ended != nil {
		go f()
		return func() {}
	}
	if s.onEnd == nil {
		s.onEnd = map[uint64]func(){}
	}
	s.lastWatch++
	id := s.lastWatch
	s.onEnd[id] = f
	return func() {
		s.mu.Lock()
		delete(s.onEnd, id)
		s.mu.Unlock()
	}
}

// arm sets a timer at the deadline, so Done closes on time even when
// nothing else runs; s.mu held.
func (s *Session) arm() {
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timer = time.AfterFunc(time.Until(s.until), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.ended != nil {
			return
		}
		if time.Now().Before(s.until) {
			s.arm()
			return
		}
		s.checkDeadline()
	})
}

// acknowledged records a keep-alive sent at sent, unless the lease already
// counts as lost: a late acknowledgement revives nothing, since the leader
// may have expired the session and granted its locks meanwhile.
func (s *Session) acknowledged(sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkDeadline()
	if s.ended != nil {
		return
	}
	if next := sent.Add(s.ttl - SafetyMargin(s.ttl)); next.After(s.until) {
		s.until = next
		s.arm()
	}
}

// markGone: the server says the session does not exist.
func (s *Session) markGone(cause error) {
	s.end(&Error{kind: kindSessionLost, Reason: ReasonSessionNotFound, Code: "NOT_FOUND",
		Message: fmt.Sprintf("session %d is gone (expired or closed)", s.id), Err: cause})
}

// noteErr ends the session if err says the server forgot it.
func (s *Session) noteErr(err error) {
	if isReason(err, ReasonSessionNotFound) {
		s.markGone(err)
	}
}

// ticket numbers a new logical request of the session (Raft dissertation
// §6.3): retries reuse the number, and the numbers still waiting for their
// answers tell the server which answers it may forget.
type ticket struct {
	s   *Session
	seq uint64
}

func (s *Session) ticket() ticket {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.waiting[s.seq] = struct{}{}
	return ticket{s: s, seq: s.seq}
}

// fields are the exactly-once fields of a request: seq, ackedBelow (the
// lowest number still waiting for its answer) and inFlight (those numbers,
// the lowest 1,024), so that a long wait does not hold back the
// acknowledgement of the calls made beside it.
func (t ticket) fields(body map[string]interface{}) {
	t.s.mu.Lock()
	nums := make([]uint64, 0, len(t.s.waiting))
	for n := range t.s.waiting {
		nums = append(nums, n)
	}
	t.s.mu.Unlock()
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	low := t.seq
	if len(nums) > 0 && nums[0] < low {
		low = nums[0]
	}
	if len(nums) > 1024 {
		nums = nums[:1024]
	}
	inFlight := make([]string, len(nums))
	for i, n := range nums {
		inFlight[i] = str(n)
	}
	body["seq"] = str(t.seq)
	body["ackedBelow"] = str(low)
	body["inFlight"] = inFlight
}

// done: the answer is in, or the caller gave up and will not retry.
func (t ticket) done() {
	t.s.mu.Lock()
	delete(t.s.waiting, t.seq)
	t.s.mu.Unlock()
}

// keeper is the client's one keep-alive loop: it renews each of its
// sessions every TTL/3 from the send time of its last acknowledged renewal,
// one request each, sooner after a failure (a failover leaves little of the
// TTL).
type keeper struct {
	cl       *Client
	mu       sync.Mutex
	sessions map[*Session]struct{}
	wake     chan struct{}
	quit     chan struct{}
	started  bool
	stopped  bool
}

func newKeeper(cl *Client) *keeper {
	return &keeper{cl: cl, sessions: map[*Session]struct{}{}, wake: make(chan struct{}, 1), quit: make(chan struct{})}
}

func (k *keeper) add(s *Session, due time.Time) {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	s.due = due
	s.backoff = 50 * time.Millisecond
	k.sessions[s] = struct{}{}
	if !k.started {
		k.started = true
		go k.loop()
	}
	k.mu.Unlock()
	k.poke()
}

func (k *keeper) remove(s *Session) {
	k.mu.Lock()
	delete(k.sessions, s)
	k.mu.Unlock()
}

func (k *keeper) all() []*Session {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*Session, 0, len(k.sessions))
	for s := range k.sessions {
		out = append(out, s)
	}
	return out
}

func (k *keeper) stop() {
	k.mu.Lock()
	if !k.stopped {
		k.stopped = true
		close(k.quit)
	}
	k.mu.Unlock()
}

func (k *keeper) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

func (k *keeper) loop() {
	for {
		k.mu.Lock()
		now := time.Now()
		next := now.Add(time.Hour)
		for s := range k.sessions {
			if s.inflight {
				continue
			}
			if !s.due.After(now) {
				s.inflight = true
				go k.renew(s)
				continue
			}
			if s.due.Before(next) {
				next = s.due
			}
		}
		k.mu.Unlock()
		t := time.NewTimer(time.Until(next))
		select {
		case <-t.C:
		case <-k.wake:
		case <-k.quit:
			t.Stop()
			return
		}
		t.Stop()
	}
}

// renew sends one renewal of s. A renewal unanswered for min(TTL/3, 2 s)
// means a frozen, cut-off or deposed node: another is tried rather than
// waiting out the TTL on it.
func (k *keeper) renew(s *Session) {
	c := k.cl.c
	interval := s.ttl / 3
	patience := interval
	if patience > 2*time.Second {
		patience = 2 * time.Second
	}
	maxBackoff := interval / 4
	if maxBackoff > 250*time.Millisecond {
		maxBackoff = 250 * time.Millisecond
	}
	addr := c.target()
	sent := time.Now()
	err := c.post(context.Background(), addr, "/v1/session/keepalive", map[string]interface{}{"sessionId": str(s.id)}, nil, patience)
	var due time.Time
	if err == nil {
		c.remember(addr)
		s.acknowledged(sent)
		due = sent.Add(interval)
	} else {
		e, _ := isErr(err)
		switch {
		case c.isClosed():
			return
		case e != nil && e.Reason == ReasonSessionNotFound:
			s.markGone(e)
			return
		case e != nil && (e.Reason == ReasonUnauthenticated || e.Reason == ReasonPermissionDenied):
			// No renewal can succeed with these credentials.
			s.end(&Error{kind: kindSessionLost, Code: e.Code, Message: fmt.Sprintf("session %d cannot be renewed: %s", s.id, e.Message), Err: e})
			return
		}
		hinted := e != nil && c.learn(addr, e)
		k.mu.Lock()
		b := s.backoff
		s.backoff *= 2
		if s.backoff > maxBackoff {
			s.backoff = maxBackoff
		}
		k.mu.Unlock()
		due = time.Now()
		if !hinted {
			due = due.Add(jitter(b))
		}
	}
	k.mu.Lock()
	s.inflight = false
	s.due = due
	if err == nil {
		s.backoff = 50 * time.Millisecond
	}
	k.mu.Unlock()
	k.poke()
}
