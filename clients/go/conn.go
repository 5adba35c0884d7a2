package raftlock

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"
)

// Unary calls do their HTTP/1.1 exchange on a pooled connection in the
// calling goroutine: the request is written with http.Request.Write and
// the answer read with http.ReadResponse, both from the standard library.
// net/http's Transport hands each request to a writer goroutine and each
// answer back from a reader goroutine; on a loaded two-core machine those
// hand-offs (thread wake-ups, spinning for work) cost about as much as the
// call itself, and made the Go client 19 % slower than the Rust one.
// Streams, which live long and are few, still go through net/http.

// maxIdlePerNode is how many idle connections to one node are kept.
const maxIdlePerNode = 64

// idleTimeout is how long an idle connection is kept.
const idleTimeout = 90 * time.Second

// cancelCheck is how often a call waiting for its answer looks whether its
// context ended: a waiting acquire leaves the server's queue this soon
// after its caller gives up (the server learns it from the connection
// closing). Calls answered sooner never wake for it.
const cancelCheck = 50 * time.Millisecond

// rawConn is one connection to a node, used by one call at a time.
type rawConn struct {
	nc net.Conn
	// tcp is nc, or what it runs over with TLS.
	tcp      *net.TCPConn
	br       *bufio.Reader
	bw       *bufio.Writer
	addr     string
	idleFrom time.Time
}

// connPool keeps idle connections by node.
type connPool struct {
	dialer *net.Dialer
	tls    *tls.Config

	mu     sync.Mutex
	idle   map[string][]*rawConn
	closed bool
}

func newConnPool(dialer *net.Dialer, tlsConfig *tls.Config) *connPool {
	return &connPool{dialer: dialer, tls: tlsConfig, idle: map[string][]*rawConn{}}
}

// get returns an idle connection to addr (reused true), or dials one.
func (p *connPool) get(ctx context.Context, addr string) (*rawConn, bool, error) {
	now := time.Now()
	p.mu.Lock()
	list := p.idle[addr]
	for len(list) > 0 {
		c := list[len(list)-1]
		list = list[:len(list)-1]
		if now.Sub(c.idleFrom) < idleTimeout && c.open() {
			p.idle[addr] = list
			p.mu.Unlock()
			return c, true, nil
		}
		c.nc.Close()
	}
	p.idle[addr] = list
	p.mu.Unlock()
	nc, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	tcp, _ := nc.(*net.TCPConn)
	if p.tls != nil {
		cfg := p.tls.Clone()
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = host
		}
		// One request per connection at a time: HTTP/1.1 only, as the
		// streams' transport.
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(nc, cfg)
		if p.dialer.Timeout > 0 {
			_ = nc.SetDeadline(time.Now().Add(p.dialer.Timeout))
		}
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, false, &net.OpError{Op: "dial", Net: "tcp", Addr: nc.RemoteAddr(), Err: err}
		}
		_ = nc.SetDeadline(time.Time{})
		nc = tc
	}
	return &rawConn{nc: nc, tcp: tcp, br: bufio.NewReaderSize(nc, 4096), bw: bufio.NewWriterSize(nc, 4096), addr: addr}, false, nil
}

// open tells whether an idle connection is still open and has nothing to
// read, looking without waiting: a node that restarted or closed the
// connection while it sat idle would otherwise fail the next call after
// its request went out, when the call cannot know whether it was acted on.
// (net/http's Transport learns the same from the reader goroutine it keeps
// on every idle connection.)
func (c *rawConn) open() bool {
	if c.tcp == nil || c.br.Buffered() > 0 {
		return false
	}
	rc, err := c.tcp.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read and no error: open. Data or the end: not for us.
		_ = n
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && alive
}

// put keeps c for the next call to its node.
func (p *connPool) put(c *rawConn) {
	c.idleFrom = time.Now()
	p.mu.Lock()
	if p.closed || len(p.idle[c.addr]) >= maxIdlePerNode {
		p.mu.Unlock()
		c.nc.Close()
		return
	}
	p.idle[c.addr] = append(p.idle[c.addr], c)
	p.mu.Unlock()
}

// close closes the idle connections and every one put back later.
func (p *connPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = map[string][]*rawConn{}
	p.closed = true
	p.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.nc.Close()
		}
	}
}

// errNoAnswer: the connection ended before any byte of the answer.
var errNoAnswer = errors.New("the connection closed before an answer")

// roundTrip writes req on c and reads the answer's status, headers and
// body (at most limit bytes), ending at deadline or, checked every
// cancelCheck while the answer has not begun, when ctx ends. written says
// whether the whole request went out (else the node cannot have acted on
// it). The connection may be reused only if keep is true.
func (c *rawConn) roundTrip(ctx context.Context, req *http.Request, deadline time.Time, limit int64) (res *http.Response, body []byte, written bool, keep bool, err error) {
	if err := c.nc.SetWriteDeadline(deadline); err != nil {
		return nil, nil, false, false, err
	}
	if err := req.Write(c.bw); err != nil {
		return nil, nil, false, false, err
	}
	if err := c.bw.Flush(); err != nil {
		return nil, nil, false, false, err
	}
	// Wait for the answer's first byte in slices, so a caller that gives
	// up is noticed without a goroutine per call to watch its context.
	for {
		slice := time.Now().Add(cancelCheck)
		if slice.After(deadline) {
			slice = deadline
		}
		if err := c.nc.SetReadDeadline(slice); err != nil {
			return nil, nil, true, false, err
		}
		_, err := c.br.Peek(1)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			if errors.Is(err, net.ErrClosed) && ctx.Err() != nil {
				return nil, nil, true, false, ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				err = errNoAnswer
			}
			return nil, nil, true, false, err
		}
		if ctx.Err() != nil {
			return nil, nil, true, false, ctx.Err()
		}
		if !time.Now().Before(deadline) {
			return nil, nil, true, false, os.ErrDeadlineExceeded
		}
	}
	if err := c.nc.SetReadDeadline(deadline); err != nil {
		return nil, nil, true, false, err
	}
	res, err = http.ReadResponse(c.br, req)
	if err != nil {
		return nil, nil, true, false, err
	}
	body, err = readBody(res, limit)
	if err != nil {
		return nil, nil, true, false, err
	}
	return res, body, true, !res.Close, nil
}

// readBody reads all of res's body, refusing one over limit bytes.
func readBody(res *http.Response, limit int64) ([]byte, error) {
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errors.New("the answer is too long")
	}
	return data, nil
}
