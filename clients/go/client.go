package raftlock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/raftlock/raftlock/clients/go/internal/closing"
)

// Config says how to reach a cluster. Only Endpoints is required; zero
// durations take their defaults.
type Config struct {
	// Endpoints are client addresses of some nodes ("host:port", with or
	// without "http://" or "https://"; an entry may hold several,
	// comma-separated). The client learns the others from leader hints.
	Endpoints []string
	// TLS, when set, makes the client speak HTTPS to the nodes with this
	// configuration (its RootCAs for a private CA, its Certificates for
	// certificate authentication).
	TLS *tls.Config
	// CAFile is a PEM CA to trust: turns TLS on (with the system roots
	// replaced by it) when TLS is nil, or is added to TLS.RootCAs.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// clusters that authenticate by certificate; they turn TLS on.
	CertFile, KeyFile string
	// Token is the bearer token sent with every call, for clusters with
	// --auth-file.
	Token string
	// ClientName is shown by describe and in server logs (default
	// "go:HOST:PID").
	ClientName string
	// DialTimeout bounds opening a connection to one node (default 2 s).
	DialTimeout time.Duration
	// RequestTimeout bounds the retrying of one call, leader changes
	// included, when the caller's context allows longer (default 15 s); a
	// waiting call gets its wait on top.
	RequestTimeout time.Duration
	// AttemptTimeout bounds one attempt at one node (default 6 s); a
	// waiting call gets its wait on top.
	AttemptTimeout time.Duration
	// InitialBackoff is the first retry delay (default 25 ms); it doubles
	// up to MaxBackoff (default 800 ms), with jitter.
	InitialBackoff, MaxBackoff time.Duration
	// ProbeInterval is how often a node serving a long call (a waiting
	// acquire, an observe stream) is checked for life, and how long the
	// check may take (default 2 s): a frozen node never closes the
	// connection.
	ProbeInterval time.Duration
	// LocalAddr, when set, is the local address every connection to the
	// nodes is made from: a *net.TCPAddr, usually with port 0. For hosts
	// with several addresses, where a firewall or a node's per-source rules
	// must see one of them.
	//
	//	cfg.LocalAddr = &net.TCPAddr{IP: net.ParseIP("10.0.0.7")}
	LocalAddr net.Addr
}

// Environment variables FromEnv reads; the same as the raftlock CLI's.
const (
	EnvEndpoints  = "RAFTLOCK_ENDPOINTS"
	EnvCACert     = "RAFTLOCK_CACERT"
	EnvCert       = "RAFTLOCK_CERT"
	EnvKey        = "RAFTLOCK_KEY"
	EnvAuthToken  = "RAFTLOCK_AUTH_TOKEN"
	EnvClientName = "RAFTLOCK_CLIENT_NAME"
)

// ConfigFromEnv is the Config the raftlock CLI would use:
// RAFTLOCK_ENDPOINTS (default 127.0.0.1:7000), RAFTLOCK_CACERT,
// RAFTLOCK_CERT, RAFTLOCK_KEY, RAFTLOCK_AUTH_TOKEN and
// RAFTLOCK_CLIENT_NAME. An https:// endpoint turns TLS on with the
// system's roots.
func ConfigFromEnv() Config {
	eps := os.Getenv(EnvEndpoints)
	if strings.TrimSpace(eps) == "" {
		eps = "127.0.0.1:7000"
	}
	cfg := Config{
		Endpoints:  strings.Split(eps, ","),
		CAFile:     os.Getenv(EnvCACert),
		CertFile:   os.Getenv(EnvCert),
		KeyFile:    os.Getenv(EnvKey),
		Token:      os.Getenv(EnvAuthToken),
		ClientName: os.Getenv(EnvClientName),
	}
	if strings.HasPrefix(strings.TrimSpace(eps), "https://") {
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return cfg
}

// FromEnv is New(ConfigFromEnv()).
func FromEnv() (*Client, error) { return New(ConfigFromEnv()) }

// Client is a handle to a raftlock cluster. It finds the leader itself
// (following a follower's leader hint), retries what carries no verdict
// (no leader, no quorum, a broken connection) with jittered exponential
// backoff until the call's context ends, and keeps all its sessions alive
// from one loop. One Client per process is enough; it is safe for
// concurrent use.
type Client struct {
	c    *cluster
	cfg  Config
	keep *keeper

	mu     sync.Mutex
	closed bool
	leases map[*TokenLease]struct{}
}

func withDefaults(cfg Config) Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.DialTimeout, 2*time.Second)
	def(&cfg.RequestTimeout, 15*time.Second)
	def(&cfg.AttemptTimeout, 6*time.Second)
	def(&cfg.InitialBackoff, 25*time.Millisecond)
	def(&cfg.MaxBackoff, 800*time.Millisecond)
	def(&cfg.ProbeInterval, 2*time.Second)
	if cfg.ClientName == "" {
		host, _ := os.Hostname()
		cfg.ClientName = fmt.Sprintf("go:%s:%d", host, os.Getpid())
	}
	return cfg
}

// tlsConfig merges TLS, CAFile, CertFile and KeyFile.
func tlsConfig(cfg Config) (*tls.Config, error) {
	if cfg.TLS == nil && cfg.CAFile == "" && cfg.CertFile == "" {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLS != nil {
		t = cfg.TLS.Clone()
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, invalidArgument("reading the CA file: %v", err)
		}
		if t.RootCAs == nil {
			t.RootCAs = x509.NewCertPool()
		}
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, invalidArgument("no PEM certificate in %s", filepath.Clean(cfg.CAFile))
		}
	}
	if cfg.CertFile != "" || cfg.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, invalidArgument("loading the client certificate: %v", err)
		}
		t.Certificates = append(t.Certificates, cert)
	}
	return t, nil
}

// New makes a client for the cluster cfg describes. It does not contact the
// cluster: the first call does (Status checks that the cluster answers and
// takes the credentials).
func New(cfg Config) (*Client, error) {
	cfg = withDefaults(cfg)
	t, err := tlsConfig(cfg)
	if err != nil {
		return nil, err
	}
	cfg.TLS = t
	c, err := newCluster(cfg)
	if err != nil {
		return nil, err
	}
	cl := &Client{c: c, cfg: cfg, leases: map[*TokenLease]struct{}{}}
	cl.keep = newKeeper(cl)
	return cl, nil
}

// Close closes every session of this client (releasing their locks at
// once), gives back the unspent tokens of unfinished token leases, and
// closes the connections, ending the calls and Observe streams still in
// flight (with ErrClientClosed). What cannot be closed within ctx (or 5 s)
// is left to expire.
//
// A session that leads through package leaderelection is closed only once
// its OnStartedLeading has returned (its context is cancelled first), so
// that Close never hands the leadership over while the old leader still
// works; if it does not return within ctx, the session is not closed on
// the server but left to expire, after its local deadline.
func (cl *Client) Close(ctx context.Context) error {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil
	}
	cl.closed = true
	leases := make([]*TokenLease, 0, len(cl.leases))
	for l := range cl.leases {
		leases = append(leases, l)
	}
	cl.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range cl.keep.all() {
		wg.Add(1)
		go func(s *Session) {
			defer wg.Done()
			if !closing.Run(ctx, s) {
				s.end(localError(kindSessionLost, "CANCELLED", "session %d left to expire: the client closed while work that depends on it still ran", s.id))
				return
			}
			_ = s.Close(ctx)
		}(s)
	}
	for _, l := range leases {
		wg.Add(1)
		go func(l *TokenLease) {
			defer wg.Done()
			_, _ = l.Finish(ctx)
		}(l)
	}
	wg.Wait()
	cl.keep.stop()
	cl.c.close()
	return nil
}

func (cl *Client) checkOpen() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.closed {
		return errClosed()
	}
	return nil
}

// Member is a node's addresses.
type Member struct {
	// ID is the node id.
	ID uint64
	// PeerAddr is its Raft address.
	PeerAddr string
	// ClientAddr is its client (gRPC and HTTP) address.
	ClientAddr string
}

// Status is a node's view of the cluster.
type Status struct {
	// NodeID is the answering node's id.
	NodeID uint64
	// Role is its Raft role: "leader", "follower", "candidate", "learner",
	// "shutdown" or "unspecified".
	Role string
	// Term is the current Raft term.
	Term uint64
	// LeaderID is the leader it knows of (0: none).
	LeaderID uint64
	// LeaderAddr is the leader's client address ("" when none).
	LeaderAddr string
	// Members are the voting members.
	Members []Member
}

type memberJSON struct {
	ID         u64    `json:"id"`
	PeerAddr   string `json:"peerAddr"`
	ClientAddr string `json:"clientAddr"`
}

// Status is one node's view of the cluster (any node answers): a cheap
// way to check the cluster is reachable and the credentials are accepted.
func (cl *Client) Status(ctx context.Context) (*Status, error) {
	if err := cl.checkOpen(); err != nil {
		return nil, err
	}
	var r struct {
		NodeID     u64          `json:"nodeId"`
		Role       string       `json:"role"`
		Term       u64          `json:"term"`
		LeaderID   u64          `json:"leaderId"`
		LeaderAddr string       `json:"leaderAddr"`
		Members    []memberJSON `json:"members"`
	}
	if err := cl.c.call(ctx, "/v1/cluster/status", callOpts{anyNode: true}, func(int) interface{} { return struct{}{} }, &r); err != nil {
		return nil, err
	}
	cl.c.hint(r.LeaderAddr)
	st := &Status{NodeID: uint64(r.NodeID), Role: strings.ToLower(strings.TrimPrefix(r.Role, "ROLE_")), Term: uint64(r.Term),
		LeaderID: uint64(r.LeaderID), LeaderAddr: r.LeaderAddr}
	if st.Role == "" {
		st.Role = "unspecified"
	}
	for _, m := range r.Members {
		st.Members = append(st.Members, Member{ID: uint64(m.ID), PeerAddr: m.PeerAddr, ClientAddr: m.ClientAddr})
	}
	return st, nil
}

// Waiter is a queued acquisition, as Describe shows it.
type Waiter struct {
	// SessionID is the waiting session.
	SessionID uint64
	// Mode is the requested mode.
	Mode LockMode
	// RequestID is the waiting acquisition's request id.
	RequestID []byte
	// Count is the permits it asks for.
	Count uint32
}

// LockInfo is the holders and waiters of one lock.
type LockInfo struct {
	// Name is the lock's name.
	Name string
	// Permits is the shared capacity (0: not fixed).
	Permits uint32
	// Resized: Permits was set by Resize and holds whatever acquisitions
	// state.
	Resized bool
	// Holders in grant order.
	Holders []Grant
	// Waiters in FIFO order.
	Waiters []Waiter
	// LockDelay is non-zero while the lock is in lock-delay.
	LockDelay time.Duration
}

// Describe returns the holders (with tokens) and waiters (in FIFO order)
// of lock name, a linearizable read.
func (cl *Client) Describe(ctx context.Context, name string) (*LockInfo, error) {
	if err := cl.checkOpen(); err != nil {
		return nil, err
	}
	var r struct {
		Name    string      `json:"name"`
		Permits uint32      `json:"permits"`
		Holders []grantJSON `json:"holders"`
		Waiters []struct {
			SessionID u64    `json:"sessionId"`
			Mode      string `json:"mode"`
			RequestID []byte `json:"requestId"`
			Count     uint32 `json:"count"`
		} `json:"waiters"`
		LockDelayMs u64  `json:"lockDelayMs"`
		Resized     bool `json:"resized"`
	}
	err := cl.c.call(ctx, "/v1/lock/describe", callOpts{}, func(int) interface{} { return map[string]interface{}{"name": name} }, &r)
	if err != nil {
		return nil, err
	}
	info := &LockInfo{Name: name, Permits: r.Permits, Resized: r.Resized, Holders: grants(r.Holders), LockDelay: time.Duration(r.LockDelayMs) * time.Millisecond}
	for _, w := range r.Waiters {
		m := Exclusive
		if w.Mode == "LOCK_MODE_SHARED" {
			m = Shared
		}
		c := w.Count
		if c == 0 {
			c = 1
		}
		info.Waiters = append(info.Waiters, Waiter{SessionID: uint64(w.SessionID), Mode: m, RequestID: w.RequestID, Count: c})
	}
	return info, nil
}

// LockSummary is one lock of a listing (Client.List).
type LockSummary struct {
	// Name is the lock's name.
	Name string
	// Permits is the semaphore's size: the one Resize set, else the
	// holders' (0: not fixed).
	Permits uint32
	// Resized: Permits was set by Resize. Such a semaphore is listed even
	// when nobody holds or waits for it.
	Resized bool
	// Holders in grant order.
	Holders []Grant
	// WaiterCount is how many wait in its queue.
	WaiterCount int
	// LockDelay is non-zero while the lock is in lock-delay.
	LockDelay time.Duration
}

// List returns the locks whose names start with prefix, in name order:
// those held or waited for, and the semaphores whose size Resize set, held
// or not. It reads every page, each a linearizable read; names the caller
// may not read are left out by the server.
//
//	locks, err := cli.List(ctx, "jobs/")
//	for _, l := range locks {
//		fmt.Println(l.Name, len(l.Holders), l.WaiterCount)
//	}
func (cl *Client) List(ctx context.Context, prefix string) ([]LockSummary, error) {
	if err := cl.checkOpen(); err != nil {
		return nil, err
	}
	var out []LockSummary
	page := ""
	for {
		var r struct {
			Locks []struct {
				Name        string      `json:"name"`
				Holders     []grantJSON `json:"holders"`
				Waiters     uint32      `json:"waiters"`
				LockDelayMs u64         `json:"lockDelayMs"`
				Permits     uint32      `json:"permits"`
				Resized     bool        `json:"resized"`
			} `json:"locks"`
			NextPageToken string `json:"nextPageToken"`
		}
		body := map[string]interface{}{"prefix": prefix, "pageToken": page, "limit": 1000}
		if err := cl.c.call(ctx, "/v1/lock/list", callOpts{}, func(int) interface{} { return body }, &r); err != nil {
			return nil, err
		}
		for _, l := range r.Locks {
			out = append(out, LockSummary{
				Name:        l.Name,
				Permits:     l.Permits,
				Resized:     l.Resized,
				Holders:     grants(l.Holders),
				WaiterCount: int(l.Waiters),
				LockDelay:   time.Duration(l.LockDelayMs) * time.Millisecond,
			})
		}
		if r.NextPageToken == "" {
			return out, nil
		}
		page = r.NextPageToken
	}
}

// Resize sets the size of semaphore name to permits, held or not: from
// then on it has that many permits whatever acquisitions state, until it
// is resized again (0 forgets the size). Growing grants waiters at once;
// they are returned in FIFO order. Shrinking takes nothing from holders, it
// grants nobody until they fit. A size below what a queued acquisition asks
// for is refused with ErrPermitsMismatch. A retry after a lost answer sets
// the same size again.
//
//	granted, err := cli.Resize(ctx, "workers/pool", 8)
func (cl *Client) Resize(ctx context.Context, name string, permits uint32) ([]Grant, error) {
	if err := cl.checkOpen(); err != nil {
		return nil, err
	}
	var r struct {
		Granted []grantJSON `json:"granted"`
	}
	body := map[string]interface{}{"name": name, "permits": permits}
	if err := cl.c.call(ctx, "/v1/lock/resize", callOpts{}, func(int) interface{} { return body }, &r); err != nil {
		return nil, err
	}
	return grants(r.Granted), nil
}

// Validate tells whether token belongs to a current holder of lock name
// (a linearizable read: Chubby's CheckSequencer), and the highest token
// among the current holders.
func (cl *Client) Validate(ctx context.Context, name string, token uint64) (valid bool, current uint64, err error) {
	if err := cl.checkOpen(); err != nil {
		return false, 0, err
	}
	var r struct {
		Valid        bool `json:"valid"`
		CurrentToken u64  `json:"currentToken"`
	}
	err = cl.c.call(ctx, "/v1/lock/validate", callOpts{}, func(int) interface{} {
		return map[string]interface{}{"name": name, "token": str(token)}
	}, &r)
	return r.Valid, uint64(r.CurrentToken), err
}

// ForceRelease frees lock name whoever holds it (needs the admin right):
// the holders lose it and the next waiters are granted in the same log
// entry. It is not retried where it may already have run, since a second
// run would free the next holder too.
func (cl *Client) ForceRelease(ctx context.Context, name string) (released []Grant, err error) {
	if err := cl.checkOpen(); err != nil {
		return nil, err
	}
	var r struct {
		Released []grantJSON `json:"released"`
	}
	err = cl.c.call(ctx, "/v1/lock/force-release", callOpts{notIdempotent: true}, func(int) interface{} {
		return map[string]interface{}{"name": name}
	}, &r)
	return grants(r.Released), err
}

// isErr is errors.As for *Error.
func isErr(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
