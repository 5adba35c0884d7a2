package raftlock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Election is leader election on top of a lock: the leader is the
// exclusive holder of the election's lock, its value the grant's metadata,
// its token the term of office (fencing the leader's writes like any lock
// token). Candidates are elected in the order they started campaigning.
type Election struct {
	s    *Session
	name string

	mu    sync.Mutex
	grant *Grant
}

// NewElection makes a handle on election name for session s.
func NewElection(s *Session, name string) *Election {
	return &Election{s: s, name: name}
}

// Name is the election's name.
func (e *Election) Name() string { return e.name }

// Session is the candidate's session.
func (e *Election) Session() *Session { return e.s }

// Campaign waits in line until this session leads, publishing value. When
// ctx ends first the candidate leaves the queue at once (a leadership that
// raced the cancellation is given up) and Campaign returns ctx.Err().
// Without a deadline it campaigns for as long as the session lives.
func (e *Election) Campaign(ctx context.Context, value string) error {
	for {
		max := maxWaitTurn()
		turn := max
		if dl, ok := ctx.Deadline(); ok {
			if left := time.Until(dl); left < turn {
				turn = left
			}
		}
		if turn < 0 {
			turn = 0
		}
		err := e.campaignOnce(ctx, []byte(value), turn)
		if err == nil {
			return nil
		}
		if isReason(err, ReasonWaitTimedOut) && turn == max && ctx.Err() == nil && e.s.Valid() {
			continue
		}
		return err
	}
}

func (e *Election) campaignOnce(ctx context.Context, value []byte, wait time.Duration) error {
	s := e.s
	if err := s.Err(); err != nil {
		return err
	}
	if err := s.cancelsSettled(ctx, e.name); err != nil {
		return err
	}
	requestID := newRequestID()
	t := s.ticket()
	defer t.done()
	started := time.Now()
	var r struct {
		Leader *grantJSON `json:"leader"`
	}
	err := s.cl.c.call(ctx, "/v1/election/campaign", callOpts{wait: wait}, func(int) interface{} {
		body := map[string]interface{}{
			"name": e.name, "sessionId": str(s.id), "requestId": b64(requestID), "value": b64(value),
			"waitTimeoutMs": ms(wait - time.Since(started)),
		}
		t.fields(body)
		return body
	}, &r)
	if err != nil {
		s.noteErr(err)
		if undecided(ctx, err) {
			cancelWaitSoon(s, e.name, requestID)
		}
		return err
	}
	if r.Leader == nil {
		cancelWaitSoon(s, e.name, requestID)
		return &Error{Code: "INTERNAL", Message: "campaign answered without a leadership"}
	}
	if err := s.Err(); err != nil {
		// Elected after the session's local deadline: the server may have
		// expired the session and elected another already.
		return err
	}
	e.mu.Lock()
	e.grant = r.Leader.grant()
	e.mu.Unlock()
	return nil
}

// leadership is the current grant or ErrNotLeading.
func (e *Election) leadership() (*Grant, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.grant == nil {
		return nil, localError(kindNotLeading, "FAILED_PRECONDITION", "not leading election %q", e.name)
	}
	return e.grant, nil
}

// Token is the term-of-office token while leading (strictly increasing per
// election), else 0.
func (e *Election) Token() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.grant == nil {
		return 0
	}
	return e.grant.Token
}

// Lost is closed when the leadership can no longer be claimed because the
// session was lost or ended (the session's Done).
func (e *Election) Lost() <-chan struct{} { return e.s.Done() }

// Valid tells whether this client can still act as leader: leading, and
// the session within its local deadline.
func (e *Election) Valid() bool {
	e.mu.Lock()
	leading := e.grant != nil
	e.mu.Unlock()
	return leading && e.s.Valid()
}

// Proclaim publishes a new value for observers (at most 4 KiB) while
// leading; ErrNotLeading otherwise.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	g, err := e.leadership()
	if err != nil {
		return err
	}
	s := e.s
	if err := s.Err(); err != nil {
		return err
	}
	// Setting a value is idempotent: a retry after a lost answer is harmless.
	err = s.cl.c.call(ctx, "/v1/election/proclaim", callOpts{}, func(int) interface{} {
		return map[string]interface{}{"name": e.name, "sessionId": str(s.id), "token": str(g.Token), "value": b64([]byte(value))}
	}, nil)
	if err != nil {
		s.noteErr(err)
		return err
	}
	e.mu.Lock()
	if e.grant == g {
		c := *g
		c.Metadata = []byte(value)
		e.grant = &c
	}
	e.mu.Unlock()
	return nil
}

// Resign steps down; the next candidate in line is elected in the same log
// entry. Resigning when not leading, or after the session ended, does
// nothing.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	g := e.grant
	e.grant = nil
	e.mu.Unlock()
	if g == nil {
		return nil
	}
	s := e.s
	if s.Err() != nil {
		return nil
	}
	retried := false
	err := s.cl.c.call(ctx, "/v1/election/resign", callOpts{}, func(attempt int) interface{} {
		retried = retried || attempt > 0
		return map[string]interface{}{"name": e.name, "sessionId": str(s.id), "token": str(g.Token)}
	}, nil)
	if err == nil {
		return nil
	}
	// Only a retry may find the leadership already given up.
	if retried && isReason(err, ReasonNotHolder) {
		return nil
	}
	if isReason(err, ReasonSessionNotFound) {
		s.markGone(err)
		return nil
	}
	return err
}

// Leader is the election's current leader (a linearizable read), or
// ErrNoLeader. The leader's value is its Metadata.
func (e *Election) Leader(ctx context.Context) (*Grant, error) {
	return e.s.cl.Leader(ctx, e.name)
}

// Leader is election name's current leader (a linearizable read), or
// ErrNoLeader.
func (cl *Client) Leader(ctx context.Context, name string) (*Grant, error) {
	if err := cl.checkOpen(); err != nil {
		return nil, err
	}
	var r struct {
		Leader *grantJSON `json:"leader"`
	}
	if err := cl.c.call(ctx, "/v1/election/leader", callOpts{}, func(int) interface{} {
		return map[string]interface{}{"name": name}
	}, &r); err != nil {
		return nil, err
	}
	if r.Leader == nil {
		return nil, localError(kindNoLeader, "NOT_FOUND", "election %q has no leader", name)
	}
	return r.Leader.grant(), nil
}

// Observation is one item of Observe: the leader (nil: none), or, as the
// last item, the error that ended the observation.
type Observation struct {
	// Leader is the election's leader now; nil when it has none.
	Leader *Grant
	// Err, when set, ended the observation: a refusal no retry can fix (no
	// right to read the name, a bad name).
	Err error
}

// Observe watches the election: its leader now and at every change,
// through failovers of the cluster (the stream is reopened on the new
// leader node, and a value already seen is not sent again). The channel is
// closed when ctx ends, after an item with Err set, or when the client
// closes.
func (e *Election) Observe(ctx context.Context) <-chan Observation {
	return e.s.cl.Observe(ctx, e.name)
}

// Observe watches election name; see Election.Observe.
func (cl *Client) Observe(ctx context.Context, name string) <-chan Observation {
	out := make(chan Observation, 1)
	go cl.observe(ctx, name, out)
	return out
}

type observeLine struct {
	Leader *grantJSON `json:"leader"`
	Error  *errorBody `json:"error"`
}

func (cl *Client) observe(ctx context.Context, name string, out chan<- Observation) {
	defer close(out)
	c := cl.c
	last := "none"
	backoff := 50 * time.Millisecond
	send := func(o Observation) bool {
		select {
		case out <- o:
			return true
		case <-ctx.Done():
			return false
		case <-c.closedCh:
			return false
		}
	}
	for ctx.Err() == nil && !c.isClosed() {
		addr := c.target()
		st, err := c.openStream(ctx, addr, "/v1/election/observe", map[string]interface{}{"name": name})
		if err == nil {
			sc := bufio.NewScanner(st)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				line := bytes.TrimSpace(sc.Bytes())
				if len(line) == 0 {
					continue
				}
				var msg observeLine
				if jerr := json.Unmarshal(line, &msg); jerr != nil {
					err = &Error{Code: "INTERNAL", Message: fmt.Sprintf("undecodable observe item: %v", jerr)}
					break
				}
				if msg.Error != nil {
					err = errorFromBody(*msg.Error, 0)
					break
				}
				c.remember(addr)
				backoff = 50 * time.Millisecond
				g := msg.Leader.grant()
				// A proclaim keeps the token and changes the value; a
				// reopened stream repeats what was already seen.
				key := ""
				if g != nil {
					key = strconv.FormatUint(g.Token, 10) + ":" + b64(g.Metadata)
				}
				if key != last {
					last = key
					if !send(Observation{Leader: g}) {
						st.Close()
						return
					}
				}
			}
			st.Close()
			if err == nil {
				// Ended without an error item: the node went away.
				c.forget(addr)
			}
		}
		if ctx.Err() != nil || c.isClosed() {
			return
		}
		if err != nil {
			e, ok := isErr(err)
			if !ok {
				return
			}
			if !retryable(e) {
				send(Observation{Err: e})
				return
			}
			if c.learn(addr, e) {
				continue
			}
		}
		if sleepCtx(ctx, c.closedCh, jitter(backoff)) != nil {
			return
		}
		backoff *= 2
		if backoff > 800*time.Millisecond {
			backoff = 800 * time.Millisecond
		}
	}
}
