package raftlock

import (
	"context"
	"sync"
	"time"
)

// RateLimitOptions are what a limit allows, to create it on first use:
// Rate tokens per Per, at most Burst at once.
type RateLimitOptions struct {
	// Rate is tokens per period (at least 1). Zero: the limit must exist
	// already.
	Rate uint64
	// Per is the period (1 ms to 1 day; default a second).
	Per time.Duration
	// Burst is the most tokens at once (default 1).
	Burst uint64
}

// RateLimit is a token bucket kept by the cluster, exact through leader
// changes: over any span d it admits at most Rate × d/Per + Burst. Takes
// are not numbered: a take retried after a lost answer may be counted
// twice, which only ever admits less, never more than the limit.
type RateLimit struct {
	cl   *Client
	name string
	spec map[string]interface{}
}

// RateLimit is the rate limit name. With a Rate, takes create the limit
// with these parameters on first use (an existing limit with others is
// refused with ErrLimitConflict); without one it must exist already
// (ErrLimitNotFound). No call is made until it is used.
func (cl *Client) RateLimit(name string, o RateLimitOptions) *RateLimit {
	rl := &RateLimit{cl: cl, name: name}
	if o.Rate > 0 {
		per, burst := o.Per, o.Burst
		if per <= 0 {
			per = time.Second
		}
		if burst == 0 {
			burst = 1
		}
		rl.spec = map[string]interface{}{"rate": str(o.Rate), "perMs": ms(per), "burst": str(burst)}
	}
	return rl
}

// Name is the limit's name.
func (rl *RateLimit) Name() string { return rl.name }

// Admission is the answer to a take.
type Admission struct {
	// Admitted says the tokens were admitted.
	Admitted bool
	// N is how many (0 when not admitted).
	N uint64
	// Remaining is the tokens that could be taken at once after this.
	Remaining uint64
	// RetryAfter, when not admitted, is after how long they would be.
	RetryAfter time.Duration
}

type takeJSON struct {
	Admitted     bool `json:"admitted"`
	N            u64  `json:"n"`
	Remaining    u64  `json:"remaining"`
	RetryAfterMs u64  `json:"retryAfterMs"`
	LeaseID      u64  `json:"leaseId"`
}

func (t takeJSON) admission() Admission {
	return Admission{Admitted: t.Admitted, N: uint64(t.N), Remaining: uint64(t.Remaining), RetryAfter: time.Duration(t.RetryAfterMs) * time.Millisecond}
}

func (rl *RateLimit) take(ctx context.Context, n uint64, wait *time.Duration, lease time.Duration) (takeJSON, error) {
	var r takeJSON
	if err := rl.cl.checkOpen(); err != nil {
		return r, err
	}
	if n == 0 {
		return r, invalidArgument("n must be at least 1")
	}
	o := callOpts{}
	if wait != nil {
		if *wait < 0 {
			return r, invalidArgument("the wait must not be negative")
		}
		o.wait = *wait
	}
	started := time.Now()
	err := rl.cl.c.call(ctx, "/v1/ratelimit/take", o, func(int) interface{} {
		body := map[string]interface{}{"name": rl.name, "n": str(n)}
		if rl.spec != nil {
			body["limit"] = rl.spec
		}
		if wait != nil {
			// Each retry waits only what is left.
			body["waitTimeoutMs"] = ms(*wait - time.Since(started))
		}
		if lease > 0 {
			body["leaseMs"] = ms(lease)
		}
		return body
	}, &r)
	return r, err
}

// TryTake takes n tokens now, or says after how long they would fit.
func (rl *RateLimit) TryTake(ctx context.Context, n uint64) (Admission, error) {
	r, err := rl.take(ctx, n, nil, 0)
	return r.admission(), err
}

// Take takes n tokens, waiting on the server up to wait (and no longer
// than ctx allows) for them, in FIFO order with the other waiting takes of
// this limit. Not admitted when they would not fit within the wait. A
// wait longer than the cluster's longest (an hour by default) is refused
// with ErrInvalidArgument.
func (rl *RateLimit) Take(ctx context.Context, n uint64, wait time.Duration) (Admission, error) {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < wait {
			wait = left
		}
	}
	if wait < 0 {
		wait = 0
	}
	r, err := rl.take(ctx, n, &wait, 0)
	return r.admission(), err
}

// Reserve reserves a block of n tokens (at most the burst) to spend
// locally within validity (at most 10 s): one Raft write for the whole
// block. The cluster counts it as spent at once; call TokenLease.Finish to
// give back what is left. It returns nil, nil when the block would not fit
// now.
//
// The block may be spent until the request's first send + validity −
// SafetyMargin(validity), the rule of session TTLs: the cluster counts the
// lease from when it admitted the block, which is later.
func (rl *RateLimit) Reserve(ctx context.Context, n uint64, validity time.Duration) (*TokenLease, error) {
	if validity < time.Millisecond {
		return nil, invalidArgument("the validity must be at least 1 ms, got %v", validity)
	}
	validity = validity.Round(time.Millisecond)
	sent := time.Now()
	r, err := rl.take(ctx, n, nil, validity)
	if err != nil || !r.Admitted {
		return nil, err
	}
	l := &TokenLease{rl: rl, id: uint64(r.LeaseID), reserved: uint64(r.N), until: sent.Add(validity - SafetyMargin(validity))}
	rl.cl.mu.Lock()
	rl.cl.leases[l] = struct{}{}
	rl.cl.mu.Unlock()
	return l, nil
}

// Define creates the limit with the parameters given, or checks an
// existing one has them (ErrLimitConflict otherwise); true if this call
// created it.
func (rl *RateLimit) Define(ctx context.Context) (bool, error) {
	if rl.spec == nil {
		return false, invalidArgument("give a rate (and burst) to define a limit")
	}
	var r struct {
		Created bool `json:"created"`
	}
	err := rl.cl.c.call(ctx, "/v1/ratelimit/define", callOpts{}, func(int) interface{} {
		return map[string]interface{}{"name": rl.name, "limit": rl.spec}
	}, &r)
	return r.Created, err
}

// LimitInfo is a rate limit now.
type LimitInfo struct {
	// Name is the limit's name.
	Name string
	// Rate is tokens per Per.
	Rate uint64
	// Per is the period.
	Per time.Duration
	// Burst is the most tokens at once.
	Burst uint64
	// Available is the whole tokens that could be taken at once now.
	Available uint64
	// Admitted and Refused count takes since the limit was defined.
	Admitted, Refused uint64
	// Leases is the token leases outstanding.
	Leases uint32
}

// Describe returns the limit's parameters, tokens available now and
// totals (a linearizable read); ErrLimitNotFound if it does not exist.
func (rl *RateLimit) Describe(ctx context.Context) (*LimitInfo, error) {
	var r struct {
		Name  string `json:"name"`
		Limit struct {
			Rate  u64 `json:"rate"`
			PerMs u64 `json:"perMs"`
			Burst u64 `json:"burst"`
		} `json:"limit"`
		Available u64    `json:"available"`
		Admitted  u64    `json:"admitted"`
		Refused   u64    `json:"refused"`
		Leases    uint32 `json:"leases"`
	}
	err := rl.cl.c.call(ctx, "/v1/ratelimit/describe", callOpts{}, func(int) interface{} {
		return map[string]interface{}{"name": rl.name}
	}, &r)
	if err != nil {
		return nil, err
	}
	return &LimitInfo{Name: rl.name, Rate: uint64(r.Limit.Rate), Per: time.Duration(r.Limit.PerMs) * time.Millisecond,
		Burst: uint64(r.Limit.Burst), Available: uint64(r.Available), Admitted: uint64(r.Admitted), Refused: uint64(r.Refused), Leases: r.Leases}, nil
}

// Delete forgets the limit (needs the admin right on the name); true if it
// existed.
func (rl *RateLimit) Delete(ctx context.Context) (bool, error) {
	var r struct {
		Existed bool `json:"existed"`
	}
	err := rl.cl.c.call(ctx, "/v1/ratelimit/delete", callOpts{}, func(int) interface{} {
		return map[string]interface{}{"name": rl.name}
	}, &r)
	return r.Existed, err
}

// TokenLease is a block of tokens reserved with Reserve, spent locally
// until it runs out or its validity ends. Finish gives back what was not
// spent; a lease still open when the client closes is given back then.
type TokenLease struct {
	rl       *RateLimit
	id       uint64
	reserved uint64
	until    time.Time

	mu       sync.Mutex
	spent    uint64
	finished bool
}

// ID is the lease's id on the cluster.
func (l *TokenLease) ID() uint64 { return l.id }

// Reserved is the tokens the block holds.
func (l *TokenLease) Reserved() uint64 { return l.reserved }

// Left is the tokens not spent yet.
func (l *TokenLease) Left() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reserved - l.spent
}

// ValidUntil is when the block stops being spendable.
func (l *TokenLease) ValidUntil() time.Time { return l.until }

// Valid tells whether tokens of the block may still be spent: not
// finished, and its validity, less the safety margin, not over.
func (l *TokenLease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.finished && time.Now().Before(l.until)
}

// TrySpend spends one token if the block has one left and is still valid
// (no call to the cluster).
func (l *TokenLease) TrySpend() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished || !time.Now().Before(l.until) || l.spent >= l.reserved {
		return false
	}
	l.spent++
	return true
}

// Finish stops spending and gives back what is left; it returns how many
// tokens the cluster credited back (0 when nothing was left, the lease was
// too old, or on a second call).
func (l *TokenLease) Finish(ctx context.Context) (uint64, error) {
	l.mu.Lock()
	if l.finished {
		l.mu.Unlock()
		return 0, nil
	}
	l.finished = true
	unused := l.reserved - l.spent
	l.mu.Unlock()
	cl := l.rl.cl
	cl.mu.Lock()
	delete(cl.leases, l)
	cl.mu.Unlock()
	if unused == 0 {
		return 0, nil
	}
	var r struct {
		Credited u64 `json:"credited"`
	}
	err := cl.c.call(ctx, "/v1/ratelimit/return", callOpts{}, func(int) interface{} {
		return map[string]interface{}{"name": l.rl.name, "leaseId": str(l.id), "unused": str(unused)}
	}, &r)
	return uint64(r.Credited), err
}
