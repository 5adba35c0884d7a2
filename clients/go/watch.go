package raftlock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// LockEventKind is what happened to a lock.
type LockEventKind int

const (
	// EventUnknown is a kind this client does not know (from a newer
	// server).
	EventUnknown LockEventKind = iota
	// EventGranted: granted to an acquire at once.
	EventGranted
	// EventHandoff: granted to a waiter by the command that freed the lock.
	EventHandoff
	// EventReleased: released by its holder, or by the holder closing its
	// session.
	EventReleased
	// EventExpired: released because the holder's session expired.
	EventExpired
	// EventForceReleased: taken away by an administrator's ForceRelease.
	EventForceReleased
	// EventHoldExpired: released by the leader because the hold's cap ran
	// out.
	EventHoldExpired
	// EventLockDelayStarted: a lock-delay started; nobody is granted the
	// lock until it ends (LockEvent.LockDelay says how long).
	EventLockDelayStarted
	// EventLockDelayEnded: a lock-delay ended; the waiters it held back are
	// granted next (as handoffs).
	EventLockDelayEnded
)

var eventKinds = map[string]LockEventKind{
	"LOCK_EVENT_KIND_GRANTED":            EventGranted,
	"LOCK_EVENT_KIND_HANDOFF":            EventHandoff,
	"LOCK_EVENT_KIND_RELEASED":           EventReleased,
	"LOCK_EVENT_KIND_EXPIRED":            EventExpired,
	"LOCK_EVENT_KIND_FORCE_RELEASED":     EventForceReleased,
	"LOCK_EVENT_KIND_HOLD_EXPIRED":       EventHoldExpired,
	"LOCK_EVENT_KIND_LOCK_DELAY_STARTED": EventLockDelayStarted,
	"LOCK_EVENT_KIND_LOCK_DELAY_ENDED":   EventLockDelayEnded,
}

// String implements fmt.Stringer: "granted", "handoff", "released",
// "expired", "force-released", "hold-expired", "lock-delay-started",
// "lock-delay-ended" or "unknown".
func (k LockEventKind) String() string {
	switch k {
	case EventGranted:
		return "granted"
	case EventHandoff:
		return "handoff"
	case EventReleased:
		return "released"
	case EventExpired:
		return "expired"
	case EventForceReleased:
		return "force-released"
	case EventHoldExpired:
		return "hold-expired"
	case EventLockDelayStarted:
		return "lock-delay-started"
	case EventLockDelayEnded:
		return "lock-delay-ended"
	}
	return "unknown"
}

// LockEvent is one change of one lock's holders.
type LockEvent struct {
	// Kind is what happened.
	Kind LockEventKind
	// Name is the lock's name.
	Name string
	// SessionID is the session that got or lost the lock.
	SessionID uint64
	// Token is the grant's fencing token.
	Token uint64
	// Mode is how it is held (grants and handoffs).
	Mode LockMode
	// Metadata is the holder's metadata (grants and handoffs).
	Metadata []byte
	// Count is the permits taken (1 for an exclusive hold).
	Count uint32
	// LockDelay is how long a lock-delay lasts (EventLockDelayStarted).
	LockDelay time.Duration
}

// WatchBatch is the events one applied command caused under the watched
// prefix, in order.
type WatchBatch struct {
	// Index is the command's index: what WatchAfter resumes after.
	Index uint64
	// At is when the leader proposed the command, on its wall clock.
	At time.Time
	// Events are what the command did to the watched locks.
	Events []LockEvent
}

// WatchOption configures Watch.
type WatchOption func(*watchOptions)

type watchOptions struct {
	after uint64
}

// WatchAfter resumes a watch after index, a WatchBatch.Index (or
// Watcher.Index) seen before, say by an earlier run of the program: what
// came after it is delivered, with no gap and nothing twice, while the
// cluster still remembers that far back (else ErrWatchCompacted). Without
// it a watch starts from now.
//
//	w, err := cli.Watch(ctx, "deploy/", raftlock.WatchAfter(saved))
func WatchAfter(index uint64) WatchOption {
	return func(o *watchOptions) { o.after = index }
}

// Watcher is an open watch of a prefix (Client.Watch). Next returns its
// batches of events; Close, or the end of the context Watch was given,
// stops it.
type Watcher struct {
	cl     *Client
	prefix string
	ctx    context.Context
	cancel context.CancelFunc
	// items hands each batch to Next; unbuffered, so that a batch read is
	// either delivered or dropped with the watch, and a slow reader slows
	// the stream rather than a buffer growing.
	items chan *WatchBatch
	// ended is closed once the reading goroutine has returned, err set.
	ended chan struct{}
	err   error

	mu    sync.Mutex
	index uint64
}

// Watch watches every grant, handoff, release, expiry and force-release of
// the locks whose names start with prefix ("" for every lock the caller
// may read), in log order. It returns once the watch is open, so nothing
// that happens afterwards is missed; Index then says where it starts.
// The watch reconnects by itself (to another node if its node goes away)
// and resumes after the last command it read, so no event is missed or
// repeated. It ends with ErrWatchCompacted when it was away longer than
// the node's history reaches (read the state afresh with List or Describe
// and watch again), or with the error of a refusal (a bad prefix, no right
// to read), which Watch returns directly when the first opening meets it.
//
// One goroutine reads the stream until ctx ends, Close is called, the
// watch fails, or the client closes.
//
//	w, err := cli.Watch(ctx, "deploy/")
//	if err != nil {
//		return err
//	}
//	defer w.Close()
//	for {
//		b, err := w.Next(ctx)
//		if err != nil {
//			return err
//		}
//		for _, e := range b.Events {
//			fmt.Println(e.Kind, e.Name, e.SessionID, e.Token)
//		}
//	}
func (cl *Client) Watch(ctx context.Context, prefix string, opts ...WatchOption) (*Watcher, error) {
	if err := cl.checkOpen(); err != nil {
		return nil, err
	}
	var o watchOptions
	for _, f := range opts {
		f(&o)
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &Watcher{cl: cl, prefix: prefix, ctx: wctx, cancel: cancel, items: make(chan *WatchBatch), ended: make(chan struct{})}
	ws, err := w.connect(o.after, time.Now().Add(cl.cfg.RequestTimeout))
	if err != nil {
		cancel()
		return nil, err
	}
	w.index = ws.start
	go w.run(ws)
	return w, nil
}

// Next returns the next batch of events, waiting for it until ctx ends
// (ctx.Err(), the watch carrying on). Once the watch has ended it returns
// why: ErrWatchCompacted, a refusal, ErrClientClosed, or the error of the
// context Watch was given (context.Canceled after Close).
//
//	b, err := w.Next(ctx)
//	if errors.Is(err, raftlock.ErrWatchCompacted) {
//		// read the state afresh (List, Describe) and watch from now
//	}
func (w *Watcher) Next(ctx context.Context) (*WatchBatch, error) {
	if w.ctx.Err() != nil {
		<-w.ended
		return nil, w.err
	}
	select {
	case b := <-w.items:
		w.mu.Lock()
		w.index = b.Index
		w.mu.Unlock()
		return b, nil
	case <-w.ended:
		return nil, w.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Index is the index of the last batch Next returned, or, before any,
// the index the watch started after: save it and pass it to WatchAfter to
// resume from there.
func (w *Watcher) Index() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.index
}

// Close ends the watch and waits for its goroutine to return; Next then
// returns context.Canceled. Closing twice does nothing.
func (w *Watcher) Close() error {
	w.cancel()
	<-w.ended
	return nil
}

// watchLine is one object of the stream: a batch, or the error that ends
// it.
type watchLine struct {
	Index  u64 `json:"index"`
	AtMs   u64 `json:"atMs"`
	Events []struct {
		Kind        string `json:"kind"`
		Name        string `json:"name"`
		SessionID   u64    `json:"sessionId"`
		Token       u64    `json:"token"`
		Mode        string `json:"mode"`
		Metadata    []byte `json:"metadata"`
		Count       uint32 `json:"count"`
		LockDelayMs u64    `json:"lockDelayMs"`
	} `json:"events"`
	Error *errorBody `json:"error"`
}

func (l *watchLine) batch() *WatchBatch {
	b := &WatchBatch{Index: uint64(l.Index), At: time.UnixMilli(int64(l.AtMs)), Events: make([]LockEvent, len(l.Events))}
	for i, e := range l.Events {
		ev := LockEvent{
			Kind:      eventKinds[e.Kind],
			Name:      e.Name,
			SessionID: uint64(e.SessionID),
			Token:     uint64(e.Token),
			Metadata:  e.Metadata,
			Count:     e.Count,
			LockDelay: time.Duration(e.LockDelayMs) * time.Millisecond,
		}
		if e.Mode == "LOCK_MODE_SHARED" {
			ev.Mode = Shared
		}
		// The server leaves it out where it is one (an exclusive hold, an
		// event that ends a hold).
		if ev.Count == 0 {
			ev.Count = 1
		}
		b.Events[i] = ev
	}
	return b
}

// watchStream is one open stream of the watch, at one node.
type watchStream struct {
	rc    io.ReadCloser
	sc    *bufio.Scanner
	addr  string
	start uint64
	// pending is a batch the opening object carried, to deliver first.
	pending *watchLine
}

// next reads the stream's next object: io.EOF when the stream ended
// cleanly (the node went away), the refusal of an error object, or the
// read's failure.
func (ws *watchStream) next() (*watchLine, error) {
	for ws.sc.Scan() {
		line := bytes.TrimSpace(ws.sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var l watchLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, &Error{Code: "INTERNAL", Message: fmt.Sprintf("node %s: undecodable watch item: %v", ws.addr, err)}
		}
		if l.Error != nil {
			return nil, errorFromBody(*l.Error, 0)
		}
		return &l, nil
	}
	if err := ws.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &Error{Code: "INTERNAL", Message: fmt.Sprintf("node %s: a watch item over 64 MiB", ws.addr)}
		}
		return nil, attemptError(ws.addr, err, false)
	}
	return nil, io.EOF
}

// stopped is why the watch must stop without trying further, if it must.
func (w *Watcher) stopped() error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if w.cl.c.isClosed() {
		return errClosed()
	}
	return nil
}

// attempt opens the watch at addr and reads its opening object.
func (w *Watcher) attempt(addr string, after uint64) (*watchStream, error) {
	rc, err := w.cl.c.openStream(w.ctx, addr, "/v1/lock/watch", map[string]interface{}{"prefix": w.prefix, "afterIndex": str(after)})
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(rc)
	// One command's events can be many (a session that held thousands of
	// locks expiring), each with up to 4 KiB of metadata.
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	ws := &watchStream{rc: rc, sc: sc, addr: addr, start: after}
	first, err := ws.next()
	if err != nil {
		rc.Close()
		if err == io.EOF {
			err = attemptError(addr, errors.New("the watch ended before it opened"), false)
		}
		return nil, err
	}
	if i := uint64(first.Index); i > ws.start {
		ws.start = i
	}
	if len(first.Events) > 0 {
		ws.pending = first
	}
	return ws, nil
}

// connect opens the watch after index after, on the leader if known, else
// on any node, retrying what carries no verdict with jittered exponential
// backoff until giveUp (zero: until the watch stops).
func (w *Watcher) connect(after uint64, giveUp time.Time) (*watchStream, error) {
	c := w.cl.c
	backoff := c.cfg.InitialBackoff
	for {
		if err := w.stopped(); err != nil {
			return nil, err
		}
		addr := c.target()
		ws, err := w.attempt(addr, after)
		if err == nil {
			return ws, nil
		}
		if stop := w.stopped(); stop != nil {
			return nil, stop
		}
		e, ok := isErr(err)
		if !ok {
			return nil, err
		}
		if !retryable(e) {
			return nil, e
		}
		if c.learn(addr, e) {
			continue
		}
		if !giveUp.IsZero() && !time.Now().Before(giveUp) {
			return nil, &Error{kind: kindUnavailable, Code: "UNAVAILABLE", Reason: e.Reason, Leader: e.Leader, HTTPStatus: e.HTTPStatus, Err: e,
				Message: fmt.Sprintf("cluster unavailable: the watch of %q did not open in time; last: %s", w.prefix, e.Message)}
		}
		if err := sleepCtx(w.ctx, c.closedCh, jitter(backoff)); err != nil {
			return nil, err
		}
		backoff *= 2
		if backoff > c.cfg.MaxBackoff {
			backoff = c.cfg.MaxBackoff
		}
	}
}

func (w *Watcher) run(ws *watchStream) {
	defer close(w.ended)
	w.err = w.follow(ws)
	// Whatever ended it, nothing is left to wait for the context.
	w.cancel()
}

// follow delivers the batches of ws and of the streams that replace it
// when it ends, until the watch stops or fails.
func (w *Watcher) follow(ws *watchStream) error {
	c := w.cl.c
	after := ws.start
	for {
		err := w.deliver(ws, &after)
		ws.rc.Close()
		if stop := w.stopped(); stop != nil {
			return stop
		}
		if err == io.EOF {
			c.forget(ws.addr)
		} else if e, ok := isErr(err); ok && retryable(e) {
			c.learn(ws.addr, e)
		} else {
			return err
		}
		if ws, err = w.connect(after, time.Time{}); err != nil {
			return err
		}
	}
}

// deliver hands ws's batches to Next until the stream ends (io.EOF) or
// fails, or the watch stops; after follows the last index read.
func (w *Watcher) deliver(ws *watchStream, after *uint64) error {
	for {
		l := ws.pending
		ws.pending = nil
		if l == nil {
			var err error
			if l, err = ws.next(); err != nil {
				return err
			}
		}
		if i := uint64(l.Index); i > *after {
			*after = i
		}
		if len(l.Events) == 0 {
			continue
		}
		select {
		case w.items <- l.batch():
		case <-w.ctx.Done():
			return w.ctx.Err()
		case <-w.cl.c.closedCh:
			return errClosed()
		}
	}
}
