package raftlock

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// LockSet is several locks held together, acquired by Session.LockAll or
// Session.TryLockAll: one log entry granted them all, each its own grant
// (with that entry's index as its fencing token). They share a session,
// so they are lost together. Each lock is fenced and released on its own:
// Mutexes gives a Mutex per lock, and Unlock releases those still held.
//
//	set, err := s.LockAll(ctx, []string{"accounts/17", "accounts/42"})
//	if err != nil {
//		return err
//	}
//	defer set.Unlock(ctx)
//	transfer(set.Token("accounts/17"), set.Token("accounts/42"))
type LockSet struct {
	s       *Session
	mutexes []*Mutex
}

// LockAll acquires every lock of names (2 to 64, in any order; repeats
// count once) exclusively and together: all are granted in one log entry,
// or none. A set that must wait queues in the FIFO queue of every one of
// its locks at once and is granted when it is at the front of all of them
// and all are free, so two callers that need overlapping sets never
// deadlock, whatever order each names them in.
//
// Waiting behaves as Mutex.Lock's: until ctx ends (the wait is then given
// up on the server at once, a set granted in the race is released, and
// LockAll returns ctx.Err()), or for at most WithWait's bound
// (ErrLockTimeout). The options WithWait and WithMetadata (stored with
// each grant) apply; a set is exclusive with no hold cap or lock-delay, so
// the other options are refused with ErrInvalidArgument.
//
//	set, err := s.LockAll(ctx, []string{"inventory/sku-1", "inventory/sku-2"}, raftlock.WithWait(5*time.Second))
func (s *Session) LockAll(ctx context.Context, names []string, opts ...MutexOption) (*LockSet, error) {
	o, names, err := lockAllRequest(names, opts)
	if err != nil {
		return nil, err
	}
	var set *LockSet
	err = waitInTurns(ctx, s, o.wait, func(ctx context.Context, turn *time.Duration) error {
		got, err := s.acquireAll(ctx, names, o, turn)
		set = got
		return err
	})
	return set, err
}

// TryLockAll acquires every lock of names together only if all are free
// now (nobody holds one in the way, nobody queues for one, no lock-delay),
// and returns ErrLocked otherwise, holding none of them. WithMetadata
// applies; the other options are refused as by LockAll. If ctx ends (or
// the cluster becomes unreachable) while the request is out, a set it may
// have got is released in the background.
//
//	set, err := s.TryLockAll(ctx, []string{"shards/3", "shards/4"})
//	if errors.Is(err, raftlock.ErrLocked) {
//		return nil // another worker has one of them
//	}
func (s *Session) TryLockAll(ctx context.Context, names []string, opts ...MutexOption) (*LockSet, error) {
	o, names, err := lockAllRequest(names, opts)
	if err != nil {
		return nil, err
	}
	return s.acquireAll(ctx, names, o, nil)
}

// lockAllRequest checks the options of a set and puts its names in the
// order the server grants them in, without repeats.
func lockAllRequest(names []string, opts []MutexOption) (mutexOptions, []string, error) {
	var o mutexOptions
	for _, f := range opts {
		f(&o)
	}
	if o.shared || o.permits > 0 || o.count > 0 || o.maxHold != 0 || o.lockDelay != 0 {
		return o, nil, invalidArgument("a lock set is exclusive, with no hold cap or lock-delay; take such a lock on its own")
	}
	if o.wait < 0 {
		return o, nil, invalidArgument("the wait must not be negative")
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	out := sorted[:0]
	for i, n := range sorted {
		if i == 0 || n != sorted[i-1] {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return o, nil, invalidArgument("a lock set needs names")
	}
	return o, out, nil
}

// acquireAll is one acquisition of a set, numbered and retried as one with
// one request id, as Mutex.acquire is. wait nil is a try.
func (s *Session) acquireAll(ctx context.Context, names []string, o mutexOptions, wait *time.Duration) (*LockSet, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := s.cancelsSettled(ctx, n); err != nil {
			return nil, err
		}
	}
	requestID := newRequestID()
	t := s.ticket()
	defer t.done()
	started := time.Now()
	co := callOpts{}
	if wait != nil {
		co.wait = *wait
	}
	var r struct {
		Acquired bool        `json:"acquired"`
		Grants   []grantJSON `json:"grants"`
		Holders  []grantJSON `json:"holders"`
	}
	err := s.cl.c.call(ctx, "/v1/lock/acquire-all", co, func(int) interface{} {
		body := map[string]interface{}{
			"sessionId": str(s.id), "names": names, "requestId": b64(requestID),
		}
		t.fields(body)
		if len(o.metadata) > 0 {
			body["metadata"] = b64(o.metadata)
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
			cancelWaitsSoon(s, names, requestID)
		}
		return nil, err
	}
	if r.Acquired && len(r.Grants) != len(names) {
		cancelWaitsSoon(s, names, requestID)
		return nil, &Error{Code: "INTERNAL", Message: fmt.Sprintf("acquire of %d locks answered with %d grants", len(names), len(r.Grants))}
	}
	if !r.Acquired {
		if wait == nil {
			busy := names[0]
			if len(r.Holders) > 0 {
				busy = r.Holders[0].Name
			}
			return nil, localError(kindLocked, "FAILED_PRECONDITION", "lock set %q is busy (%q)", names, busy)
		}
		return nil, &Error{Reason: ReasonWaitTimedOut, Code: "DEADLINE_EXCEEDED", Message: fmt.Sprintf("timed out waiting for locks %q", names)}
	}
	if err := s.Err(); err != nil {
		// Granted after the session's local deadline: the server may
		// already have expired the session and granted the locks to others.
		return nil, err
	}
	set := &LockSet{s: s, mutexes: make([]*Mutex, len(r.Grants))}
	for i := range r.Grants {
		g := r.Grants[i].grant()
		m := NewMutex(s, g.Name)
		m.hold(g, started)
		set.mutexes[i] = m
	}
	return set, nil
}

// Session is the session that holds the set.
func (ls *LockSet) Session() *Session { return ls.s }

// Mutexes are the set's locks, one Mutex each, in name order: for each
// lock's Token and Grant, and to release them one at a time with Unlock.
//
//	for _, m := range set.Mutexes() {
//		fmt.Println(m.Name(), m.Token())
//	}
func (ls *LockSet) Mutexes() []*Mutex {
	return append([]*Mutex(nil), ls.mutexes...)
}

// Names are the set's lock names, in name order.
func (ls *LockSet) Names() []string {
	out := make([]string, len(ls.mutexes))
	for i, m := range ls.mutexes {
		out[i] = m.Name()
	}
	return out
}

// Token is lock name's fencing token while the set holds it, else 0.
// Pass it with every write to what that lock protects.
//
//	store.Debit(ctx, "17", amount, set.Token("accounts/17"))
func (ls *LockSet) Token(name string) uint64 {
	for _, m := range ls.mutexes {
		if m.Name() == name {
			return m.Token()
		}
	}
	return 0
}

// Tokens is each held lock's fencing token, by name. One log entry
// granted them, so they are equal; each fences its own lock.
func (ls *LockSet) Tokens() map[string]uint64 {
	out := make(map[string]uint64, len(ls.mutexes))
	for _, m := range ls.mutexes {
		if t := m.Token(); t != 0 {
			out[m.Name()] = t
		}
	}
	return out
}

// Grants are the holds still held, as the cluster recorded them, in name
// order.
func (ls *LockSet) Grants() []Grant {
	out := make([]Grant, 0, len(ls.mutexes))
	for _, m := range ls.mutexes {
		if g := m.Grant(); g != nil {
			out = append(out, *g)
		}
	}
	return out
}

// Lost is closed when the set can no longer be claimed: its session was
// lost or ended (the session's Done; a set has no hold cap).
//
//	select {
//	case <-set.Lost():
//		return set.Err()
//	case <-work:
//	}
func (ls *LockSet) Lost() <-chan struct{} { return ls.s.Done() }

// Err is nil while every lock of the set is held and can be claimed, else
// why not (ErrSessionLost, or ErrNotHolder for a lock released since).
func (ls *LockSet) Err() error {
	for _, m := range ls.mutexes {
		if err := m.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Valid tells whether this client can still claim every lock of the set.
func (ls *LockSet) Valid() bool { return ls.Err() == nil }

// Unlock releases every lock of the set still held (each its own release,
// as the server records them; the next waiters of each are granted at
// once). It tries them all and returns the first failure. After the
// session ended it does nothing; with none of the locks still held it
// returns ErrNotHolder.
//
//	if err := set.Unlock(ctx); err != nil {
//		log.Printf("releasing %v: %v", set.Names(), err)
//	}
func (ls *LockSet) Unlock(ctx context.Context) error {
	var first error
	held := 0
	for _, m := range ls.mutexes {
		if m.Grant() == nil {
			continue
		}
		held++
		if err := m.Unlock(ctx); err != nil && first == nil {
			first = err
		}
	}
	if held == 0 {
		return &Error{Reason: ReasonNotHolder, Code: "FAILED_PRECONDITION", Message: fmt.Sprintf("lock set %q holds none of its locks", ls.Names())}
	}
	return first
}
