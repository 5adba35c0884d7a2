package raftlock_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
	"github.com/raftlock/raftlock/clients/go/internal/testcluster"
)

// wantReason checks err matches sentinel, carries the server's reason,
// and matches no other reason's sentinel.
func wantReason(t *testing.T, what string, err error, sentinel error, reason string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: %v, want %v", what, err, sentinel)
	}
	var e *raftlock.Error
	if !errors.As(err, &e) || e.Reason != reason {
		t.Fatalf("%s: %#v, want reason %s", what, err, reason)
	}
	for _, other := range []error{raftlock.ErrNotHolder, raftlock.ErrStaleToken, raftlock.ErrLockTimeout, raftlock.ErrPermissionDenied} {
		if other != sentinel && errors.Is(err, other) {
			t.Fatalf("%s: %v also matches %v", what, err, other)
		}
	}
}

func TestTypedErrorsForEachReasonACallerCanMeet(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Extra: []string{"--max-locks-per-session", "3", "--max-waiters-per-lock", "1"}})
	cl := connect(t, c)
	ctx := ctxT(t, 60*time.Second)

	if _, err := cl.NewSession(ctx, raftlock.WithTTL(10*time.Millisecond)); true {
		wantReason(t, "ttl 10ms", err, raftlock.ErrTTLOutOfRange, raftlock.ReasonTTLOutOfRange)
	}
	s := session(t, cl, 10*time.Second)
	wantReason(t, "empty name", raftlock.NewMutex(s, "").TryLock(ctx), raftlock.ErrInvalidName, raftlock.ReasonInvalidName)

	m := raftlock.NewMutex(s, "err/a")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	wantReason(t, "release under another token", s.Release(ctx, "err/a", m.Token()+1), raftlock.ErrStaleToken, raftlock.ReasonStaleToken)
	wantReason(t, "a second acquisition by the holder", raftlock.NewMutex(s, "err/a").TryLock(ctx), raftlock.ErrAlreadyHeld, raftlock.ReasonAlreadyHeld)

	other := session(t, cl, 10*time.Second)
	if err := raftlock.NewMutex(other, "err/a").TryLock(ctx); !errors.Is(err, raftlock.ErrLocked) {
		t.Fatalf("try-lock of a held lock: %v", err)
	}
	err := raftlock.NewMutex(other, "err/a", raftlock.WithWait(200*time.Millisecond)).Lock(ctx)
	wantReason(t, "a wait that runs out", err, raftlock.ErrLockTimeout, raftlock.ReasonWaitTimedOut)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait that runs out also matches context.DeadlineExceeded: %v", err)
	}

	// One waiter at most (--max-waiters-per-lock 1); a second wait by the
	// same session is refused as such.
	wctx, stopWaiting := context.WithCancel(ctx)
	waiting := make(chan error, 1)
	go func() { waiting <- raftlock.NewMutex(other, "err/a").Lock(wctx) }()
	eventually(t, "queued", 10*time.Second, func() bool { return len(waiters(t, cl, "err/a")) == 1 })
	wantReason(t, "a second wait of one session", raftlock.NewMutex(other, "err/a").Lock(ctx), raftlock.ErrAlreadyWaiting, raftlock.ReasonAlreadyWaiting)
	third := session(t, cl, 10*time.Second)
	wantReason(t, "a full queue", raftlock.NewMutex(third, "err/a").Lock(ctx), raftlock.ErrTooManyWaiters, raftlock.ReasonTooManyWaiters)
	stopWaiting()
	<-waiting

	// Three locks per session (--max-locks-per-session 3).
	for _, n := range []string{"err/b", "err/c"} {
		if err := raftlock.NewMutex(s, n).TryLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wantReason(t, "a fourth lock", raftlock.NewMutex(s, "err/d").TryLock(ctx), raftlock.ErrTooManyLocks, raftlock.ReasonTooManyLocks)

	sem := raftlock.NewMutex(other, "err/sem", raftlock.WithPermits(2))
	if err := sem.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	wantReason(t, "another permit count", raftlock.NewMutex(third, "err/sem", raftlock.WithPermits(3)).TryLock(ctx), raftlock.ErrPermitsMismatch, raftlock.ReasonPermitsMismatch)

	if _, err := cl.ForceRelease(ctx, "err/a"); err != nil {
		t.Fatal(err)
	}
	wantReason(t, "unlock after a force-release", m.Unlock(ctx), raftlock.ErrNotHolder, raftlock.ReasonNotHolder)

	if err := raftlock.NewElection(s, "err/e").Proclaim(ctx, "x"); !errors.Is(err, raftlock.ErrNotLeading) {
		t.Fatalf("proclaim without leading: %v", err)
	}
	if _, err := cl.RateLimit("err/none", raftlock.RateLimitOptions{}).TryTake(ctx, 1); true {
		wantReason(t, "an unknown limit", err, raftlock.ErrLimitNotFound, raftlock.ReasonLimitNotFound)
	}
	if _, err := cl.RateLimit("err/rl", raftlock.RateLimitOptions{Rate: 5}).TryTake(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RateLimit("err/rl", raftlock.RateLimitOptions{Rate: 6}).TryTake(ctx, 1); true {
		wantReason(t, "other parameters", err, raftlock.ErrLimitConflict, raftlock.ReasonLimitConflict)
	}
	if _, err := cl.RateLimit("err/rl", raftlock.RateLimitOptions{Rate: 5}).Take(context.Background(), 1, 2*time.Hour); true {
		wantReason(t, "a wait past the cluster's longest", err, raftlock.ErrInvalidArgument, raftlock.ReasonInvalidArgument)
	}

	// The client's own verdicts.
	capped := raftlock.NewMutex(third, "err/cap", raftlock.WithMaxHold(time.Second))
	if err := capped.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-capped.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("a hold cap of 1s did not close Lost")
	}
	if err := capped.Err(); !errors.Is(err, raftlock.ErrHoldExpired) || !errors.Is(err, raftlock.ErrSessionLost) {
		t.Fatalf("capped hold: %v", err)
	}
	if !third.Valid() {
		t.Fatal("a hold cap does not end the session")
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	if err := raftlock.NewMutex(s, "err/z").TryLock(ctx); !errors.Is(err, raftlock.ErrSessionLost) {
		t.Fatalf("a closed session: %v", err)
	}
	dead, err := raftlock.New(raftlock.Config{Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t))}})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := dead.Status(short); !errors.Is(err, raftlock.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no node answers: %v", err)
	}
	dead2, _ := raftlock.New(raftlock.Config{Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t))}, RequestTimeout: 300 * time.Millisecond})
	if _, err := dead2.Status(ctx); !errors.Is(err, raftlock.ErrUnavailable) {
		t.Fatalf("no node answers within the request timeout: %v", err)
	}
	_ = dead.Close(ctx)
	if _, err := dead.Status(ctx); !errors.Is(err, raftlock.ErrClientClosed) {
		t.Fatalf("a closed client: %v", err)
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestBearerTokens(t *testing.T) {
	teamA, root := "team-a-token-4711", "root-token-0815"
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth.toml")
	conf := fmt.Sprintf(`[roles.team-a]
rules = [{ prefix = "team-a/", allow = ["read", "lock"] }]
[roles.root]
rules = [{ prefix = "", allow = ["read", "lock", "admin"] }]
[[identities]]
name = "billing-worker"
token_sha256 = "%s"
roles = ["team-a"]
[[identities]]
name = "ops"
token_sha256 = "%s"
roles = ["root"]
`, sha(teamA), sha(root))
	if err := os.WriteFile(auth, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	c := testcluster.Start(t, testcluster.Options{Extra: []string{"--auth-file", auth}, Token: root})
	ctx := ctxT(t, 60*time.Second)
	fast := func(cfg *raftlock.Config) { cfg.RequestTimeout = 3 * time.Second }
	if _, err := connect(t, c, fast).Status(ctx); true {
		wantReason(t, "no token", err, raftlock.ErrUnauthenticated, raftlock.ReasonUnauthenticated)
	}
	if _, err := connect(t, c, fast, func(cfg *raftlock.Config) { cfg.Token = "not-a-token" }).NewSession(ctx); true {
		wantReason(t, "an unknown token", err, raftlock.ErrUnauthenticated, raftlock.ReasonUnauthenticated)
	}
	a := connect(t, c, func(cfg *raftlock.Config) { cfg.Token = teamA })
	s := session(t, a, 10*time.Second)
	wantReason(t, "a name without the right", raftlock.NewMutex(s, "team-b/x").TryLock(ctx), raftlock.ErrPermissionDenied, raftlock.ReasonPermissionDenied)
	for o := range a.Observe(ctx, "team-b/e") {
		wantReason(t, "observing a name without the right", o.Err, raftlock.ErrPermissionDenied, raftlock.ReasonPermissionDenied)
	}
	m := raftlock.NewMutex(s, "team-a/x")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ForceRelease(ctx, "team-a/x"); true {
		wantReason(t, "force-release without admin", err, raftlock.ErrPermissionDenied, raftlock.ReasonPermissionDenied)
	}
	ops := connect(t, c, func(cfg *raftlock.Config) { cfg.Token = root })
	released, err := ops.ForceRelease(ctx, "team-a/x")
	if err != nil || len(released) != 1 || released[0].Token != m.Token() {
		t.Fatalf("force-release by an admin: %v %v", released, err)
	}
}

func TestTLSWithAPrivateCAATokenOrAClientCertificate(t *testing.T) {
	dev := testcluster.StartDev(t, "--tls", "--auth")
	ctx := ctxT(t, 60*time.Second)
	eps := []string{dev.Vars["RAFTLOCK_ENDPOINTS"]}
	ca := dev.Vars["RAFTLOCK_CACERT"]
	if eps[0] == "" || ca == "" || dev.Vars["RAFTLOCK_AUTH_TOKEN"] == "" || dev.CertFile == "" {
		t.Fatalf("raftlockd dev printed %v", dev.Vars)
	}
	byToken, err := raftlock.New(raftlock.Config{Endpoints: eps, CAFile: ca, Token: dev.Vars["RAFTLOCK_AUTH_TOKEN"]})
	if err != nil {
		t.Fatal(err)
	}
	defer byToken.Close(ctx)
	s, err := byToken.NewSession(ctx, raftlock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m := raftlock.NewMutex(s, "team-a/job")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := byToken.Validate(ctx, "team-a/job", m.Token()); !ok || err != nil {
		t.Fatalf("validate over TLS: %v %v", ok, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	byCert, err := raftlock.New(raftlock.Config{Endpoints: eps, CAFile: ca, CertFile: dev.CertFile, KeyFile: dev.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	defer byCert.Close(ctx)
	if s, err := byCert.NewSession(ctx, raftlock.WithTTL(5*time.Second)); err != nil || !s.Valid() {
		t.Fatalf("a client certificate alone: %v", err)
	}

	anon, _ := raftlock.New(raftlock.Config{Endpoints: eps, CAFile: ca, RequestTimeout: 3 * time.Second})
	defer anon.Close(ctx)
	if _, err := anon.Status(ctx); true {
		wantReason(t, "TLS without credentials", err, raftlock.ErrUnauthenticated, raftlock.ReasonUnauthenticated)
	}
	plain, _ := raftlock.New(raftlock.Config{Endpoints: eps, Token: dev.Vars["RAFTLOCK_AUTH_TOKEN"], RequestTimeout: time.Second})
	defer plain.Close(ctx)
	if _, err := plain.Status(ctx); err == nil {
		t.Fatal("plain HTTP to a TLS port must fail")
	}

	// FromEnv reads the CLI's variables, endpoints with a scheme included.
	t.Setenv(raftlock.EnvEndpoints, "https://"+eps[0])
	t.Setenv(raftlock.EnvCACert, ca)
	t.Setenv(raftlock.EnvAuthToken, dev.Vars["RAFTLOCK_AUTH_TOKEN"])
	env, err := raftlock.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close(ctx)
	if st, err := env.Status(ctx); err != nil || st.LeaderAddr == "" {
		t.Fatalf("a client from the environment: %+v %v", st, err)
	}
}
