package raftlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

func TestTicketsAcknowledgeCallByCall(t *testing.T) {
	s := &Session{waiting: map[uint64]struct{}{}}
	a, b, c := s.ticket(), s.ticket(), s.ticket()
	b.done()
	body := map[string]interface{}{}
	c.fields(body)
	if body["seq"] != "3" || body["ackedBelow"] != "1" {
		t.Fatalf("fields %v", body)
	}
	if got := body["inFlight"].([]string); len(got) != 2 || got[0] != "1" || got[1] != "3" {
		t.Fatalf("in flight %v: a finished call must not be listed", got)
	}
	a.done()
	c.fields(body)
	if body["ackedBelow"] != "3" {
		t.Fatalf("fields %v", body)
	}
}

func TestErrorsMatchByReasonNeverByMessage(t *testing.T) {
	e := errorFromBody(errorBody{Code: "FAILED_PRECONDITION", Reason: ReasonStaleToken, Message: "not holder"}, 409)
	if !errors.Is(e, ErrStaleToken) || errors.Is(e, ErrNotHolder) {
		t.Fatalf("%v", e)
	}
	e = errorFromBody(errorBody{Code: "UNAVAILABLE", Reason: ReasonNotLeader, Leader: "10.0.0.1:7000"}, 503)
	if !errors.Is(e, ErrUnavailable) || !errors.Is(e, ErrNotLeader) || !retryable(e) || e.Leader != "10.0.0.1:7000" {
		t.Fatalf("%v", e)
	}
	e = errorFromBody(errorBody{}, 502)
	if !errors.Is(e, ErrUnavailable) || !retryable(e) {
		t.Fatalf("a proxy's 502: %v", e)
	}
	e = errorFromBody(errorBody{Code: "DEADLINE_EXCEEDED", Reason: ReasonWaitTimedOut}, 504)
	if !errors.Is(e, ErrLockTimeout) || !errors.Is(e, context.DeadlineExceeded) || retryable(e) {
		t.Fatalf("%v", e)
	}
	e = errorFromBody(errorBody{Code: "NOT_FOUND", Reason: ReasonSessionNotFound}, 404)
	if !errors.Is(e, ErrSessionLost) || !errors.Is(e, ErrSessionNotFound) {
		t.Fatalf("%v", e)
	}
}

func TestEverySentinelMatchesItsReasonAndNoOther(t *testing.T) {
	for _, p := range reasonSentinels {
		e := errorFromBody(errorBody{Code: "FAILED_PRECONDITION", Reason: p.reason, Message: "x"}, 409)
		if !errors.Is(e, p.err) {
			t.Errorf("%v does not match a refusal with reason %s", p.err, p.reason)
		}
		for _, q := range reasonSentinels {
			if q.reason != p.reason && errors.Is(e, q.err) {
				t.Errorf("a refusal with reason %s matches %v", p.reason, q.err)
			}
		}
	}
}

// serverReasons reads the reasons the server defines from the workspace:
// the OpenAPI document's Error.reason enum and reasons.proto.
func serverReasons(t *testing.T) map[string]string {
	t.Helper()
	found := map[string]string{}
	if data, err := os.ReadFile(filepath.Join("..", "..", "docs", "openapi.json")); err == nil {
		var doc struct {
			Components struct {
				Schemas map[string]struct {
					Properties map[string]struct {
						Enum []string `json:"enum"`
					} `json:"properties"`
				} `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("docs/openapi.json: %v", err)
		}
		for _, r := range doc.Components.Schemas["Error"].Properties["reason"].Enum {
			if r != "" {
				found[r] = "docs/openapi.json"
			}
		}
	}
	proto := filepath.Join("..", "..", "proto", "proto", "raftlock", "v1", "reasons.proto")
	if data, err := os.ReadFile(proto); err == nil {
		re := regexp.MustCompile(`(?m)^\s*REASON_([A-Z_]+) = [1-9]`)
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			found[m[1]] = "reasons.proto"
		}
	}
	return found
}

func TestEveryServerReasonHasASentinel(t *testing.T) {
	reasons := serverReasons(t)
	if len(reasons) == 0 {
		t.Skip("not inside the raftlock workspace: no server reasons to compare with")
	}
	have := map[string]bool{}
	for _, p := range reasonSentinels {
		have[p.reason] = true
	}
	for r, where := range reasons {
		if !have[r] {
			t.Errorf("reason %s (from %s) has no sentinel", r, where)
		}
	}
}

// A WithWait longer than one turn of the server's maximum wait is waited
// in several turns, to its end.
func TestWaitLongerThanOneTurnIsWaitedInTurns(t *testing.T) {
	defer setMaxWait(setMaxWait(700 * time.Millisecond))
	cl, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs, err := cl.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := cl.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holder := NewMutex(hs, "turns/a")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = NewMutex(ws, "turns/a", WithWait(2*time.Second)).Lock(ctx)
	took := time.Since(start)
	if !errors.Is(err, ErrLockTimeout) || took < 1900*time.Millisecond || took > 5*time.Second {
		t.Fatalf("a 2 s wait in 0.7 s turns ended after %v with %v", took, err)
	}
	time.AfterFunc(1200*time.Millisecond, func() { _ = holder.Unlock(ctx) })
	w := NewMutex(ws, "turns/a", WithWait(3*time.Second))
	if err := w.Lock(ctx); err != nil {
		t.Fatalf("granted in the second turn: %v", err)
	}
	_ = w.Unlock(ctx)
}

// A listing longer than a page is read to its end, in creation order.
func TestListSessionsReadsEveryPage(t *testing.T) {
	defer func(n uint32) { sessionPage = n }(sessionPage)
	sessionPage = 2
	cl, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := "pager-" + time.Now().Format("150405.000000000")
	var want []uint64
	for i := 0; i < 5; i++ {
		s, err := cl.NewSession(ctx, WithClientName(name))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, s.ID())
	}
	listed, err := cl.ListSessions(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, s := range listed {
		got = append(got, s.ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listed %v in pages of 2, want %v", got, want)
	}
}

// A set waited for longer than one turn of the server's maximum wait is
// waited in turns too.
func TestLockAllLongerThanOneTurnIsWaitedInTurns(t *testing.T) {
	defer setMaxWait(setMaxWait(700 * time.Millisecond))
	cl, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs, err := cl.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := cl.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holder := NewMutex(hs, "turnset/b")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(1200*time.Millisecond, func() { _ = holder.Unlock(ctx) })
	start := time.Now()
	set, err := ws.LockAll(ctx, []string{"turnset/a", "turnset/b"}, WithWait(3*time.Second))
	if err != nil {
		t.Fatalf("granted in the second turn: %v", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("granted after %v, before the holder released", took)
	}
	_ = set.Unlock(ctx)
}
