package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
)

// The harness decodes each line as its Op (serde): the field names, their
// order, the enum spellings and the fields left out must be serde's.
func TestOpLinesAreWhatTheHarnessWrites(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Now()
	rec := &recorder{origin: t0, since: 5 * time.Second, out: &out, nextProcess: 7}
	lost := spec{
		process:    rec.process(),
		f:          fLost,
		session:    u64p(3),
		validUntil: timep(t0.Add(time.Second)),
		value:      map[string]interface{}{"by_server": true},
	}
	rec.recordAt(typeOk, &lost, errp("a<b & c"), t0)
	acquire := spec{process: rec.process(), f: fAcquire, lock: "mutex/1", session: u64p(3)}
	rec.recordAt(typeInvoke, &acquire, nil, t0.Add(-6*time.Second))
	proclaim := spec{process: 8, f: fProclaim, lock: "election/0", session: u64p(3), token: u64p(65536),
		validUntil: timep(t0.Add(-10 * time.Second)), value: "p8-1"}
	rec.recordAt(typeInfo, &proclaim, errp(""), t0.Add(time.Millisecond))
	want := `{"index":0,"time_ns":5000000000,"process":7,"type":"ok","f":"lost","lock":"","session":3,"valid_until_ns":6000000000,"value":{"by_server":true},"error":"a<b & c"}
{"index":0,"time_ns":0,"process":8,"type":"invoke","f":"acquire","lock":"mutex/1","session":3}
{"index":0,"time_ns":5001000000,"process":8,"type":"info","f":"proclaim","lock":"election/0","session":3,"token":65536,"valid_until_ns":0,"value":"p8-1","error":""}
`
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// Times are nanoseconds since --clock-base on CLOCK_MONOTONIC, whatever
// this process's own clock counts from.
func TestTimesAreOnTheHarnessClock(t *testing.T) {
	now, err := monotonicNs()
	if err != nil {
		t.Skip(err)
	}
	rec, err := newRecorder(now-uint64(3*time.Second), 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := time.Duration(rec.ns(time.Now()))
	if got < 3*time.Second || got > 3*time.Second+time.Second {
		t.Fatalf("%v after a base 3 s ago", got)
	}
	later, _ := monotonicNs()
	if d := time.Duration(rec.ns(time.Now())) - time.Duration(later-(now-uint64(3*time.Second))); d < -50*time.Millisecond || d > 50*time.Millisecond {
		t.Fatalf("the recorder's clock is %v off CLOCK_MONOTONIC", d)
	}
	if p := rec.process(); p != 1 {
		t.Fatalf("first process %d", p)
	}
}

// An op whose outcome is unknown retires its process; one that surely
// failed does not: the harness's reading of the same errors.
func TestOutcomesAreReadAsTheHarnessReadsThem(t *testing.T) {
	for _, c := range []struct {
		err           error
		indeterminate bool
	}{
		{&raftlock.Error{Reason: raftlock.ReasonNotHolder, Code: "FAILED_PRECONDITION"}, false},
		{&raftlock.Error{Reason: raftlock.ReasonSessionNotFound, Code: "NOT_FOUND"}, true},
		{&raftlock.Error{Reason: raftlock.ReasonPermissionDenied, Code: "PERMISSION_DENIED"}, false},
		{&raftlock.Error{Reason: raftlock.ReasonNotLeader, Code: "UNAVAILABLE"}, true},
		{&raftlock.Error{Reason: raftlock.ReasonInternal, Code: "INTERNAL"}, true},
		{&raftlock.Error{Reason: "A_REASON_FROM_A_NEWER_SERVER", Code: "FAILED_PRECONDITION"}, true},
		{&raftlock.Error{Code: "NOT_FOUND", HTTPStatus: 404}, true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("wrapped: %w", &raftlock.Error{Reason: raftlock.ReasonStaleToken}), false},
	} {
		if got := indeterminate(c.err); got != c.indeterminate {
			t.Errorf("%v: indeterminate %v", c.err, got)
		}
	}
	if !timedOut(&raftlock.Error{Reason: raftlock.ReasonWaitTimedOut}) || !timedOut(&raftlock.Error{Reason: raftlock.ReasonWaitCancelled}) {
		t.Fatal("a wait that ran out is not a timeout")
	}
	if timedOut(&raftlock.Error{Reason: raftlock.ReasonNotHolder}) {
		t.Fatal("a refusal is a timeout")
	}
}

// The harness starts its worker with its own command line.
func TestTheHarnessCommandLineIsAccepted(t *testing.T) {
	a, err := parse([]string{"worker", "--endpoints", "127.0.0.1:1,127.0.0.1:2", "--endpoints=127.0.0.1:3",
		"--workload", "election", "--seed", "32", "--clock-base", "123456789", "--first-process", "2000000",
		"--local-address", "127.0.0.62"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.endpoints) != 3 || a.workload != "election" || a.seed != 32 || a.clockBase != 123456789 ||
		a.firstProcess != 2000000 || a.localAddress.String() != "127.0.0.62" {
		t.Fatalf("%+v", a)
	}
	if _, err := parse([]string{"--loopback-net", "127.0.1", "worker", "--workload", "mutex", "--seed", "1",
		"--clock-base", "0", "--first-process", "1"}, io.Discard); err != nil {
		t.Fatalf("a global flag before the subcommand: %v", err)
	}
	for _, bad := range [][]string{
		{"run", "--workload", "mutex"},
		{"worker", "--workload", "fenced", "--seed", "1", "--clock-base", "0", "--first-process", "1"},
		{"worker", "--workload", "mutex", "--clock-base", "0", "--first-process", "1"},
		{"worker", "--workload", "mutex", "--seed", "1", "--clock-base", "0", "--first-process", "1", "--local-address", "host"},
	} {
		if _, err := parse(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
