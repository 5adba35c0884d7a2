package raftlock

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// suspectFor is how long a node that stopped answering is tried last.
const suspectFor = 5 * time.Second

// cluster is the nodes of one cluster as a client knows them: the
// endpoints, the leader last seen, and calls that follow the leader with
// jittered exponential backoff.
type cluster struct {
	cfg    Config
	scheme string
	// http carries the streams; unary calls go through pool.
	http *http.Client
	pool *connPool

	mu        sync.Mutex
	endpoints []string
	leader    string
	next      int
	suspects  map[string]time.Time
	closed    bool
	closedCh  chan struct{}
	// calls is the cancel of every request in flight, so Close can end
	// them; a map rather than a goroutine per call watching closedCh, which
	// cost each call a goroutine start and a wake-up on another thread.
	calls  map[uint64]context.CancelFunc
	lastID uint64
}

// normalize turns "http://host:port/" into "host:port".
func normalize(endpoint string) string {
	e := strings.TrimSpace(endpoint)
	e = strings.TrimPrefix(e, "http://")
	e = strings.TrimPrefix(e, "https://")
	return strings.TrimRight(e, "/")
}

func newCluster(cfg Config) (*cluster, error) {
	c := &cluster{cfg: cfg, scheme: "http", suspects: map[string]time.Time{}, closedCh: make(chan struct{}), calls: map[uint64]context.CancelFunc{}}
	for _, e := range cfg.Endpoints {
		for _, part := range strings.Split(e, ",") {
			n := normalize(part)
			if n == "" {
				continue
			}
			if _, _, err := net.SplitHostPort(n); err != nil {
				return nil, invalidArgument("bad endpoint %q: expected host:port", part)
			}
			c.endpoints = append(c.endpoints, n)
		}
	}
	if len(c.endpoints) == 0 {
		return nil, invalidArgument("no endpoints given")
	}
	for _, r := range cfg.Token {
		if r < 0x21 || r > 0x7e {
			return nil, invalidArgument("the token must be printable ASCII without spaces")
		}
	}
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 15 * time.Second}
	if cfg.LocalAddr != nil {
		// Checked here: the dialer would only fail each call, as if every
		// node were unreachable.
		a, ok := cfg.LocalAddr.(*net.TCPAddr)
		if !ok {
			return nil, invalidArgument("the local address must be a *net.TCPAddr, got %T", cfg.LocalAddr)
		}
		if a != nil {
			dialer.LocalAddr = a
		}
	}
	tr := &http.Transport{
		DialContext:         dialer.DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: cfg.DialTimeout,
		// Every call is a small POST to a node this client chose; a proxy
		// from the environment would hide the leader hint's address.
		Proxy: nil,
	}
	if cfg.TLS != nil {
		c.scheme = "https"
		tr.TLSClientConfig = cfg.TLS.Clone()
		// HTTP/2 would multiplex waiting acquires over one connection, and a
		// waiter's connection closing is one of the ways the server learns
		// the caller left; keep one request per connection.
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	c.http = &http.Client{Transport: tr}
	c.pool = newConnPool(dialer, cfg.TLS)
	return c, nil
}

// target is the node to try next: the leader last seen, else the endpoints
// in turn, passing over nodes that recently stopped answering unless every
// node did.
func (c *cluster) target() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader != "" {
		return c.leader
	}
	now := time.Now()
	for i := 0; i < len(c.endpoints); i++ {
		addr := c.endpoints[c.next%len(c.endpoints)]
		c.next = (c.next + 1) % len(c.endpoints)
		if !now.Before(c.suspects[addr]) {
			return addr
		}
	}
	addr := c.endpoints[c.next%len(c.endpoints)]
	c.next = (c.next + 1) % len(c.endpoints)
	return addr
}

// remember takes addr for the leader: it just served a leader-only call.
func (c *cluster) remember(addr string) {
	c.mu.Lock()
	c.leader = addr
	delete(c.suspects, addr)
	c.mu.Unlock()
}

// forget stops taking addr for the leader.
func (c *cluster) forget(addr string) {
	c.mu.Lock()
	if c.leader == addr {
		c.leader = ""
	}
	c.mu.Unlock()
}

// suspect: addr did not answer; neither the leader nor the next to try.
func (c *cluster) suspect(addr string) {
	c.mu.Lock()
	if c.leader == addr {
		c.leader = ""
	}
	c.suspects[addr] = time.Now().Add(suspectFor)
	c.mu.Unlock()
}

// follow takes a hinted address for the leader, learning it as an
// endpoint if it is new.
func (c *cluster) follow(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	known := false
	for _, e := range c.endpoints {
		if e == addr {
			known = true
			break
		}
	}
	if !known {
		c.endpoints = append(c.endpoints, addr)
	}
	c.leader = addr
	delete(c.suspects, addr)
}

// hint learns the leader from a status answer.
func (c *cluster) hint(leaderAddr string) {
	if a := normalize(leaderAddr); a != "" {
		c.follow(a)
	}
}

// learn learns from a failed attempt at addr: follows a leader hint
// (true), or stops taking addr for the leader.
func (c *cluster) learn(addr string, e *Error) bool {
	if h := normalize(e.Leader); h != "" && h != addr {
		c.follow(h)
		return true
	}
	if e.HTTPStatus == 0 {
		c.suspect(addr)
	} else {
		c.forget(addr)
	}
	return false
}

func (c *cluster) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *cluster) close() {
	c.mu.Lock()
	var calls []context.CancelFunc
	if !c.closed {
		c.closed = true
		close(c.closedCh)
		for _, cancel := range c.calls {
			calls = append(calls, cancel)
		}
		c.calls = nil
	}
	c.mu.Unlock()
	for _, cancel := range calls {
		cancel()
	}
	c.pool.close()
	c.http.CloseIdleConnections()
}

// cutOnClose has cancel called when the client closes, so that Close ends
// the calls and streams still in flight (their callers get
// ErrClientClosed) rather than leaving them to their timeouts or, for a
// stream, open for good. Call the function it returns when the request
// ends.
func (c *cluster) cutOnClose(cancel context.CancelFunc) (done func()) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		return func() {}
	}
	c.lastID++
	id := c.lastID
	c.calls[id] = cancel
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
	}
}

func errClosed() *Error {
	return localError(kindClientClosed, "CANCELLED", "the client is closed")
}

// attemptError is an attempt that failed below HTTP: no answer was read.
// notSent says the request surely never reached a server.
func attemptError(addr string, err error, notSent bool) *Error {
	e := &Error{kind: kindUnavailable, Code: "UNAVAILABLE", Message: fmt.Sprintf("node %s: %v", addr, err), Err: err}
	if notSent {
		e.Code = "UNAVAILABLE_NOT_SENT"
	}
	return e
}

func notSent(e *Error) bool { return e.Code == "UNAVAILABLE_NOT_SENT" }

// unsent tells whether a transport error means the request never left
// this host.
func unsent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EADDRNOTAVAIL)
}

// retryable tells whether a failed attempt may be tried again elsewhere:
// refusals that carry a verdict are final.
func retryable(e *Error) bool {
	if e.kind == kindUnavailable {
		return true
	}
	switch e.Reason {
	case ReasonNotLeader, ReasonNoQuorum, ReasonStopping:
		return true
	}
	return e.Reason == "" && e.kind == "" && (e.Code == "UNAVAILABLE" || e.Code == "UNKNOWN" || e.Code == "CANCELLED" || e.Code == "DEADLINE_EXCEEDED")
}

// post sends one attempt of a unary call to addr and decodes the answer
// into out. It returns a *Error for every failure but the caller's ctx
// ending, which returns ctx.Err().
func (c *cluster) post(ctx context.Context, addr, path string, body interface{}, out interface{}, timeout time.Duration) error {
	if c.isClosed() {
		return errClosed()
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return invalidArgument("encoding %s: %v", path, err)
	}
	// The attempt's timeout is a deadline on the connection (no timer per
	// call); the context ends it early when the caller or Close cancels.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer c.cutOnClose(cancel)()
	// A long call to a node that stops answering (frozen, cut off) would
	// otherwise wait out its whole timeout instead of moving on.
	// The watch starts only once the call has outlived one probe interval:
	// most calls end well before, and a goroutine and a ticker for each
	// would cost them latency.
	var stalled chan struct{}
	if timeout > c.cfg.ProbeInterval && path != "/v1/cluster/status" {
		stalled = make(chan struct{})
		stop := make(chan struct{})
		defer close(stop)
		t := time.AfterFunc(c.cfg.ProbeInterval, func() {
			c.watch(addr, stop, func() { close(stalled); cancel() })
		})
		defer t.Stop()
	}
	deadline := time.Now().Add(timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	req, err := http.NewRequest(http.MethodPost, c.scheme+"://"+addr+path, bytes.NewReader(payload))
	if err != nil {
		return invalidArgument("bad request to %s: %v", addr, err)
	}
	c.headers(req, "application/json")
	failed := func(err error, written bool) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c.isClosed() {
			return errClosed()
		}
		if stalled != nil && isClosedChan(stalled) {
			return attemptError(addr, errors.New("stopped answering"), false)
		}
		return attemptError(addr, err, !written)
	}
	conn, _, err := c.pool.get(actx, addr)
	if err != nil {
		return failed(err, false)
	}
	res, data, written, keep, err := conn.roundTrip(actx, req, deadline, 16<<20)
	if keep {
		c.pool.put(conn)
	} else {
		// Also how a node learns that a waiting caller left.
		conn.nc.Close()
	}
	if err != nil {
		return failed(err, written)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return refusal(res, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &Error{Code: "INTERNAL", Message: fmt.Sprintf("node %s: undecodable answer to %s: %v", addr, path, err), HTTPStatus: res.StatusCode}
	}
	return nil
}

// refusal types a non-2xx answer.
func refusal(res *http.Response, data []byte) *Error {
	var b errorBody
	// A proxy's page is no JSON: the status alone speaks then.
	_ = json.Unmarshal(data, &b)
	if b.Leader == "" {
		b.Leader = res.Header.Get("raftlock-leader")
	}
	return errorFromBody(b, res.StatusCode)
}

func isClosedChan(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (c *cluster) headers(req *http.Request, accept string) {
	req.Header.Set("content-type", "application/json")
	req.Header.Set("accept", accept)
	if c.cfg.Token != "" {
		req.Header.Set("authorization", "Bearer "+c.cfg.Token)
	}
}

// watch reads addr's status every probe interval until stop closes, and
// calls cut (once) if the node does not answer in time. Only silence
// counts: a refusal is an answer.
func (c *cluster) watch(addr string, stop <-chan struct{}, cut func()) {
	t := time.NewTicker(c.cfg.ProbeInterval)
	defer t.Stop()
	// Called one probe interval into the call: the first probe is now.
	for first := true; ; first = false {
		if !first {
			select {
			case <-stop:
				return
			case <-c.closedCh:
				return
			case <-t.C:
			}
		} else if isClosedStop(stop) {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-stop:
			case <-ctx.Done():
			}
			cancel()
		}()
		err := c.post(ctx, addr, "/v1/cluster/status", struct{}{}, nil, c.cfg.ProbeInterval)
		stopped := isClosedStop(stop)
		cancel()
		if stopped {
			return
		}
		var e *Error
		if errors.As(err, &e) && e.HTTPStatus == 0 && e.kind == kindUnavailable {
			c.suspect(addr)
			cut()
			return
		}
	}
}

func isClosedStop(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// callOpts are one logical call's settings.
type callOpts struct {
	// wait is the server-side wait the call asks for; it extends the
	// attempt timeout and the retry budget.
	wait time.Duration
	// notIdempotent calls are retried only when the node surely did not act
	// on them (not the leader, connection refused).
	notIdempotent bool
	// anyNode: a success does not show the node leads.
	anyNode bool
}

// call runs one logical call, retrying on other nodes with jittered
// exponential backoff until it succeeds, is refused for good, or its
// budget ends: ctx, and at most Config.RequestTimeout (plus the wait) of
// retrying. build makes each attempt's body given the attempt number.
func (c *cluster) call(ctx context.Context, path string, o callOpts, build func(attempt int) interface{}, out interface{}) error {
	giveUp := time.Now().Add(c.cfg.RequestTimeout + o.wait)
	backoff := c.cfg.InitialBackoff
	for attempt := 0; ; attempt++ {
		if c.isClosed() {
			return errClosed()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		addr := c.target()
		body := build(attempt)
		timeout := c.cfg.AttemptTimeout + o.wait
		err := c.post(ctx, addr, path, body, out, timeout)
		if err == nil {
			if !o.anyNode {
				c.remember(addr)
			}
			return nil
		}
		var e *Error
		if !errors.As(err, &e) {
			return err
		}
		again := retryable(e)
		if o.notIdempotent {
			again = e.Reason == ReasonNotLeader || notSent(e)
		}
		if !again {
			if notSent(e) {
				e.Code = "UNAVAILABLE"
			}
			return e
		}
		hinted := c.learn(addr, e)
		left := time.Until(giveUp)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < left {
			left = time.Until(dl)
		}
		if left <= 0 || c.isClosed() {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &Error{kind: kindUnavailable, Code: "UNAVAILABLE", Reason: e.Reason, Leader: e.Leader, HTTPStatus: e.HTTPStatus, Err: e,
				Message: fmt.Sprintf("cluster unavailable: %s not served in time; last: %s", path, e.Message)}
		}
		if !hinted {
			d := jitter(backoff)
			if d > left {
				d = left
			}
			if err := sleepCtx(ctx, c.closedCh, d); err != nil {
				return err
			}
			backoff *= 2
			if backoff > c.cfg.MaxBackoff {
				backoff = c.cfg.MaxBackoff
			}
		}
	}
}

// jitter scales d by a random factor in [0.5, 1.5), so that clients that
// failed together do not retry together.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}

// sleepCtx sleeps d, or less if ctx ends (its error) or the client closes.
func sleepCtx(ctx context.Context, closed <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return errClosed()
	}
}

// openStream opens a streaming call (newline-delimited JSON) at addr. The
// node is watched while the stream is open; a node that stops answering
// ends it.
func (c *cluster) openStream(ctx context.Context, addr, path string, body interface{}) (io.ReadCloser, error) {
	if c.isClosed() {
		return nil, errClosed()
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, invalidArgument("encoding %s: %v", path, err)
	}
	sctx, cancelCtx := context.WithCancel(ctx)
	uncut := c.cutOnClose(cancelCtx)
	cancel := func() {
		cancelCtx()
		uncut()
	}
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, c.scheme+"://"+addr+path, bytes.NewReader(payload))
	if err != nil {
		cancel()
		return nil, invalidArgument("bad request to %s: %v", addr, err)
	}
	c.headers(req, "application/x-ndjson")
	opened := time.AfterFunc(c.cfg.AttemptTimeout, cancel)
	res, err := c.http.Do(req)
	opened.Stop()
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if c.isClosed() {
			return nil, errClosed()
		}
		return nil, attemptError(addr, err, unsent(err))
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		res.Body.Close()
		cancel()
		return nil, refusal(res, data)
	}
	stop := make(chan struct{})
	go c.watch(addr, stop, cancel)
	return &stream{body: res.Body, cancel: cancel, stop: stop}, nil
}

// stream is an open streaming answer; Close hangs up.
type stream struct {
	body   io.ReadCloser
	cancel context.CancelFunc
	stop   chan struct{}
	once   sync.Once
}

// Read reads the answer.
func (s *stream) Read(p []byte) (int, error) { return s.body.Read(p) }

// Close hangs up.
func (s *stream) Close() error {
	s.once.Do(func() {
		close(s.stop)
		s.cancel()
	})
	return s.body.Close()
}
