package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync/atomic"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
)

// The harness's constants (jepsen/src/workload/mod.rs, jepsen/src/run.rs).
const (
	// ttl is the session TTL of workers with an even seed.
	ttl = 3 * time.Second
	// longTTL, for the others, outlives a failover, so sessions that lived
	// under one leader meet the next.
	longTTL = 10 * time.Second
	// clientProcessLongHolds is the share of grants held past the TTL by
	// workers in client processes, which the client nemesis pauses and
	// cuts off while they hold.
	clientProcessLongHolds = 0.7
	// plantEnv plants a bug in this worker, to show the client checks
	// catch a holder that acts on a lease it no longer has.
	plantEnv = "RAFTLOCK_JEPSEN_PLANT_CLIENT"
)

// names are the lock (or election) names a workload uses.
func names(workload string) []string {
	switch workload {
	case "mutex":
		return []string{"mutex/0", "mutex/1", "mutex/2"}
	case "election":
		return []string{"election/0", "election/1"}
	}
	return nil
}

// definite are the refusals that settle that a call did not take effect.
// Any other failure may have taken effect: the harness's own reading of
// the Rust client's errors (classify in jepsen/src/backend/mod.rs), where a
// lost answer, a locally lost session, the server saying the session is
// gone (an earlier attempt may have landed before it expired), a server
// fault or an unknown reason is indeterminate.
var definite = map[string]bool{
	raftlock.ReasonInvalidName: true, raftlock.ReasonTTLOutOfRange: true,
	raftlock.ReasonInvalidArgument: true,
	raftlock.ReasonWaitNotFound:    true, raftlock.ReasonNotHolder: true,
	raftlock.ReasonStaleToken: true, raftlock.ReasonPermitsMismatch: true,
	raftlock.ReasonRequestReleased: true, raftlock.ReasonRequestFinished: true,
	raftlock.ReasonRequestAcknowledged: true, raftlock.ReasonAlreadyHeld: true,
	raftlock.ReasonAlreadyWaiting: true, raftlock.ReasonTooManyWaiters: true,
	raftlock.ReasonTooManyLocks: true, raftlock.ReasonTooManyUnacknowledged: true,
	raftlock.ReasonLimitExceeded: true, raftlock.ReasonNoSpace: true,
	raftlock.ReasonUnauthenticated: true, raftlock.ReasonPermissionDenied: true,
	raftlock.ReasonMembershipChangeRefused: true, raftlock.ReasonLearnerNotCaughtUp: true,
	raftlock.ReasonWatchCompacted: true, raftlock.ReasonLimitNotFound: true,
	raftlock.ReasonLimitConflict: true,
}

// indeterminate tells whether a failed call may have taken effect all the
// same (recorded info, and its process retires) rather than surely not
// (fail).
func indeterminate(err error) bool {
	var e *raftlock.Error
	if !errors.As(err, &e) {
		// A context that ended while the call was out.
		return true
	}
	if e.Reason != "" {
		return !definite[e.Reason]
	}
	// Verdicts of the client's own that nothing was sent.
	if errors.Is(e, raftlock.ErrNotLeading) || errors.Is(e, raftlock.ErrLocked) || errors.Is(e, raftlock.ErrNoLeader) {
		return false
	}
	// Unreachable, the session lost locally, an unreadable answer, a
	// status without a reason.
	return true
}

// timedOut tells whether an acquisition's wait ran out: a grant may have
// raced the timeout, so it is recorded info without an error, as the
// harness records a wait the Rust client reports timed out.
func timedOut(err error) bool {
	return errors.Is(err, raftlock.ErrLockTimeout) || errors.Is(err, raftlock.ErrWaitCancelled)
}

// worker is the one logical client of this process: the harness's Worker
// for the mutex and election workloads, over the Go client.
type worker struct {
	cl          *raftlock.Client
	rec         *recorder
	workload    string
	names       []string
	rng         *rand.Rand
	process     uint64
	session     *raftlock.Session
	ttl         time.Duration
	longHolds   float64
	ignoreLease bool
}

func newWorker(cl *raftlock.Client, rec *recorder, workload string, seed uint64, ignoreLease bool) *worker {
	w := &worker{
		cl:          cl,
		rec:         rec,
		workload:    workload,
		names:       names(workload),
		rng:         rand.New(rand.NewSource(int64(seed))),
		process:     rec.process(),
		ttl:         longTTL,
		longHolds:   clientProcessLongHolds,
		ignoreLease: ignoreLease,
	}
	if seed%2 == 0 {
		w.ttl = ttl
	}
	return w
}

// run steps until stop is set, then closes the session, recorded.
func (w *worker) run(stop *int32) {
	for atomic.LoadInt32(stop) == 0 {
		w.step()
	}
	if s := w.session; s != nil {
		w.session = nil
		w.close(s)
	}
}

func (w *worker) spec(f, lock string, session uint64) spec {
	return spec{process: w.process, f: f, lock: lock, session: u64p(session)}
}

// leaseDeadline is the latest deadline the library computed, even once
// passed: what the history records as the point the holder had to stop by.
func leaseDeadline(s *raftlock.Session) time.Time { return s.ValidUntil() }

// retire ends the process after an op of unknown outcome: closing its
// session ends whatever that op may have taken; its successor is a new
// process.
func (w *worker) retire() {
	if s := w.session; s != nil {
		w.session = nil
		w.close(s)
	}
	w.process = w.rec.process()
}

// close closes s, recorded: the checkers end the process's holds there.
func (w *worker) close(s *raftlock.Session) {
	sp := spec{process: w.process, f: fClose, session: u64p(s.ID())}
	w.rec.record(typeInvoke, &sp, nil)
	_ = s.Close(context.Background())
	w.rec.record(typeOk, &sp, nil)
}

// ensureSession replaces a lost session (a process that lost its session
// starts over as a new one) and creates one if there is none; nil when the
// cluster would not create one, after a moment.
func (w *worker) ensureSession() *raftlock.Session {
	if s := w.session; s != nil && s.Err() != nil {
		w.session = nil
		w.lost(s)
		w.close(s)
		w.process = w.rec.process()
	}
	if w.session == nil {
		s, err := w.cl.NewSession(context.Background(), raftlock.WithTTL(w.ttl))
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			return nil
		}
		w.session = s
	}
	return w.session
}

// lost records that the library reported s ended, and whether the server
// ended it: a server that says "gone" before the client's deadline broke
// the lease promise, whatever the session held.
func (w *worker) lost(s *raftlock.Session) {
	sp := spec{
		process:    w.process,
		f:          fLost,
		session:    u64p(s.ID()),
		validUntil: timep(leaseDeadline(s)),
		value:      map[string]interface{}{"by_server": errors.Is(s.Err(), raftlock.ErrSessionNotFound)},
	}
	w.rec.record(typeInvoke, &sp, nil)
	w.rec.record(typeOk, &sp, nil)
}

// timed records sp's invoke, runs call and records how it ended; it tells
// whether the process must retire (the outcome is unknown).
func (w *worker) timed(sp *spec, call func() error) (retire bool) {
	w.rec.record(typeInvoke, sp, nil)
	err := call()
	if err == nil {
		w.rec.record(typeOk, sp, nil)
		return false
	}
	if indeterminate(err) {
		w.rec.record(typeInfo, sp, errp(err.Error()))
		return true
	}
	w.rec.record(typeFail, sp, errp(err.Error()))
	return false
}

// step is one round of the workload: pick a name, acquire (or campaign),
// proclaim when leading, hold briefly or long, release (or resign).
func (w *worker) step() {
	name := w.names[w.rng.Intn(len(w.names))]
	hold := time.Duration(10+w.rng.Intn(110)) * time.Millisecond
	// Long enough that keep-alives, not luck, carry the lease through the
	// faults of the round.
	long := w.rng.Float64() < w.longHolds
	var longHold time.Duration
	if long {
		lo, hi := int64(ttl/time.Millisecond)/2, int64(ttl/time.Millisecond)*3
		longHold = time.Duration(lo+w.rng.Int63n(hi-lo)) * time.Millisecond
	}
	election := w.workload == "election"
	acquireF, releaseF := fAcquire, fRelease
	if election {
		acquireF, releaseF = fCampaign, fResign
	}
	s := w.ensureSession()
	if s == nil {
		return
	}
	process := w.process
	sid := s.ID()
	sp := w.spec(acquireF, name, sid)
	// Longer than most holds, long ones included: a wait that times out
	// retires its process (the grant may have raced the timeout), and
	// sessions that live across leader changes are what leases are for.
	wait := ttl * 3
	value := fmt.Sprintf("p%d", process)

	var m *raftlock.Mutex
	var e *raftlock.Election
	var token uint64
	var err error
	w.rec.record(typeInvoke, &sp, nil)
	if election {
		e = raftlock.NewElection(s, name)
		// Campaign's wait on the server is what is left of its context.
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		err = e.Campaign(ctx, value)
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w: %v", raftlock.ErrLockTimeout, err)
		}
		cancel()
		token = e.Token()
	} else {
		m = raftlock.NewMutex(s, name, raftlock.WithWait(wait))
		err = m.Lock(context.Background())
		token = m.Token()
	}
	switch {
	case err == nil:
		sp.token = u64p(token)
		w.rec.record(typeOk, &sp, nil)
	case timedOut(err):
		w.rec.record(typeInfo, &sp, nil)
		w.retire()
		return
	case indeterminate(err):
		w.rec.record(typeInfo, &sp, errp(err.Error()))
		w.retire()
		return
	default:
		w.rec.record(typeFail, &sp, errp(err.Error()))
		// A moment before the next try, so that a refusal that repeats is
		// not a busy loop.
		time.Sleep(10 * time.Millisecond)
		return
	}

	retire := false
	if election {
		p := w.spec(fProclaim, name, sid)
		p.token = u64p(token)
		p.validUntil = timep(leaseDeadline(s))
		v := value + "-1"
		p.value = v
		retire = w.timed(&p, func() error { return e.Proclaim(context.Background(), v) })
	}
	if !retire {
		if long {
			w.holdLong(s, name, token, longHold)
		} else {
			time.Sleep(hold)
		}
		r := w.spec(releaseF, name, sid)
		r.token = u64p(token)
		r.validUntil = timep(leaseDeadline(s))
		retire = w.timed(&r, func() error {
			// For a session it knows is lost the library sends nothing and
			// answers nil; the hold ended at the session's deadline, not
			// here, so this is recorded as the loss it is (as the Rust
			// worker records the server's "session gone"), not as a release.
			lost := s.Err()
			var err error
			if election {
				err = e.Resign(context.Background())
			} else {
				err = m.Unlock(context.Background())
			}
			if lost != nil {
				return lost
			}
			return err
		})
	}
	if retire {
		w.retire()
	}
}

// holdLong holds the grant token of name for d as code in a critical
// section should: asks the library every 100 ms whether the lease still
// holds before acting (an act op, dated before the question, so a pause
// between question and record can only shorten the recorded hold), calls
// Validate now and then, and stops at once when the library reports the
// session lost. With the ignore-lease plant it never listens for the loss
// and takes every answer for "valid".
func (w *worker) holdLong(s *raftlock.Session, name string, token uint64, d time.Duration) {
	end := time.Now().Add(d)
	round := 0
	var lost <-chan struct{}
	if !w.ignoreLease {
		lost = s.Done()
	}
	for time.Now().Before(end) {
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-lost:
			t.Stop()
			w.lost(s)
			a := w.spec(fAct, name, s.ID())
			a.token = u64p(token)
			a.validUntil = timep(leaseDeadline(s))
			w.rec.record(typeInvoke, &a, nil)
			w.rec.record(typeFail, &a, errp("lost() fired"))
			return
		case <-t.C:
		}
		asked := time.Now()
		valid := s.Err() == nil || w.ignoreLease
		a := w.spec(fAct, name, s.ID())
		a.token = u64p(token)
		// While valid, the deadline the answer was given under; else the
		// last one, as the library keeps it.
		a.validUntil = timep(leaseDeadline(s))
		w.rec.recordAt(typeInvoke, &a, nil, asked)
		if !valid {
			w.rec.recordAt(typeFail, &a, errp("is_valid() is false"), asked)
			return
		}
		w.rec.recordAt(typeOk, &a, nil, asked)
		round++
		if round%5 == 0 {
			w.validate(name, s.ID(), token, leaseDeadline(s))
		}
	}
}

// validate records Validate(name, token) by the holder in session, whose
// lease is promised until leaseUntil. A read changes nothing: its process
// goes on whatever the answer.
func (w *worker) validate(name string, session, token uint64, leaseUntil time.Time) {
	v := w.spec(fValidate, name, session)
	v.token = u64p(token)
	v.validUntil = timep(leaseUntil)
	w.rec.record(typeInvoke, &v, nil)
	valid, _, err := w.cl.Validate(context.Background(), name, token)
	switch {
	case err == nil:
		v.value = map[string]interface{}{"valid": valid}
		w.rec.record(typeOk, &v, nil)
	case indeterminate(err):
		w.rec.record(typeInfo, &v, errp(err.Error()))
	default:
		w.rec.record(typeFail, &v, errp(err.Error()))
	}
}
