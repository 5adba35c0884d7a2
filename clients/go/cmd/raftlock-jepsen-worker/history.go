package main

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Op types and functions, spelt as serde spells the harness's Type
// (lowercase) and F (snake_case) in jepsen/src/history.rs.
const (
	typeInvoke = "invoke"
	typeOk     = "ok"
	typeFail   = "fail"
	typeInfo   = "info"

	fAcquire  = "acquire"
	fRelease  = "release"
	fCampaign = "campaign"
	fProclaim = "proclaim"
	fResign   = "resign"
	fClose    = "close"
	fAct      = "act"
	fValidate = "validate"
	fLost     = "lost"
)

// op is one line of the history, field for field the harness's Op: the
// same names, the same order, and the optional fields left out when
// absent, as serde's skip_serializing_if does.
type op struct {
	Index        int         `json:"index"`
	TimeNs       uint64      `json:"time_ns"`
	Process      uint64      `json:"process"`
	Type         string      `json:"type"`
	F            string      `json:"f"`
	Lock         string      `json:"lock"`
	Session      *uint64     `json:"session,omitempty"`
	Token        *uint64     `json:"token,omitempty"`
	ValidUntilNs *uint64     `json:"valid_until_ns,omitempty"`
	Value        interface{} `json:"value,omitempty"`
	Error        *string     `json:"error,omitempty"`
}

// spec is an op's fields besides its type, time and error.
type spec struct {
	process    uint64
	f          string
	lock       string
	session    *uint64
	token      *uint64
	validUntil *time.Time
	value      interface{}
}

func u64p(v uint64) *uint64 { return &v }

func timep(t time.Time) *time.Time { return &t }

// recorder writes ops as JSON lines on the harness's clock and numbers
// processes, as Recorder::child does in the harness.
type recorder struct {
	// origin, on this process's clock, was since after the harness's
	// start: times are measured from origin by their monotonic readings
	// (the client library's deadlines included), since Go's cannot be
	// compared with CLOCK_MONOTONIC itself.
	origin time.Time
	since  time.Duration

	mu          sync.Mutex
	out         io.Writer
	nextProcess uint64
}

// newRecorder ties the harness's clock (its start at baseNs on
// CLOCK_MONOTONIC) to this process's: one reading of each, back to back.
func newRecorder(baseNs, firstProcess uint64, out io.Writer) (*recorder, error) {
	origin := time.Now()
	mono, err := monotonicNs()
	if err != nil {
		return nil, err
	}
	var since time.Duration
	if mono > baseNs {
		since = time.Duration(mono - baseNs)
	}
	return &recorder{origin: origin, since: since, out: out, nextProcess: firstProcess}, nil
}

// ns is t in the history's clock: nanoseconds since the harness started,
// never below zero.
func (r *recorder) ns(t time.Time) uint64 {
	d := r.since + t.Sub(r.origin)
	if d < 0 {
		return 0
	}
	return uint64(d)
}

// process is a fresh process id.
func (r *recorder) process() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.nextProcess
	r.nextProcess++
	return p
}

// record records an op of kind, now.
func (r *recorder) record(kind string, s *spec, errMsg *string) {
	r.recordAt(kind, s, errMsg, time.Now())
}

// recordAt records an op of kind that happened at at. The harness numbers
// the ops it reads, so every index is 0, as a child recorder writes them.
func (r *recorder) recordAt(kind string, s *spec, errMsg *string, at time.Time) {
	o := op{
		TimeNs:  r.ns(at),
		Process: s.process,
		Type:    kind,
		F:       s.f,
		Lock:    s.lock,
		Session: s.session,
		Token:   s.token,
		Value:   s.value,
		Error:   errMsg,
	}
	if s.validUntil != nil {
		o.ValidUntilNs = u64p(r.ns(*s.validUntil))
	}
	var line bytes.Buffer
	enc := json.NewEncoder(&line)
	// serde_json writes <, > and & as they are.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&o); err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// The harness reads whole lines; a write error means it is gone.
	_, _ = r.out.Write(line.Bytes())
}

func errp(s string) *string { return &s }
