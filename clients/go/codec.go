package raftlock

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"time"
)

// u64 is a 64-bit integer in the proto3 JSON mapping: a string, though a
// lenient encoder may send a number; absent means zero.
type u64 uint64

// UnmarshalJSON accepts a decimal string or a number.
func (v *u64) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			*v = 0
			return nil
		}
		n, err := strconv.ParseUint(s, 10, 64)
		*v = u64(n)
		return err
	}
	if string(b) == "null" {
		*v = 0
		return nil
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	*v = u64(n)
	return err
}

func str(v uint64) string { return strconv.FormatUint(v, 10) }

func ms(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10)
}

// LockMode is how a lock is held.
type LockMode int

const (
	// Exclusive: one holder, nobody beside it.
	Exclusive LockMode = iota
	// Shared: any number of shared holders (up to a semaphore's permits),
	// never beside an exclusive one.
	Shared
)

// String implements fmt.Stringer.
func (m LockMode) String() string {
	if m == Shared {
		return "shared"
	}
	return "exclusive"
}

func (m LockMode) wire() string {
	if m == Shared {
		return "LOCK_MODE_SHARED"
	}
	return "LOCK_MODE_EXCLUSIVE"
}

// Grant is a hold of a lock as the cluster recorded it.
type Grant struct {
	// Token is the fencing token: strictly increasing per lock, in grant
	// order. Pass it with every write to the protected resource.
	Token uint64
	// Name is the lock's name.
	Name string
	// Mode is how it is held.
	Mode LockMode
	// SessionID is the holding session.
	SessionID uint64
	// RequestID is the acquisition's request id (16 bytes).
	RequestID []byte
	// GrantedAt is when it was granted, on the leader's wall clock
	// (informational).
	GrantedAt time.Time
	// Metadata is what the holder attached (an election's value).
	Metadata []byte
	// Count is the permits of a semaphore this hold takes (1 for an
	// exclusive hold).
	Count uint32
	// MaxHold is the hold cap (0: none): the leader releases the hold this
	// long after granting it.
	MaxHold time.Duration
	// LockDelay is the lock-delay this hold set (0: none).
	LockDelay time.Duration
}

type grantJSON struct {
	Token       u64    `json:"token"`
	Name        string `json:"name"`
	Mode        string `json:"mode"`
	SessionID   u64    `json:"sessionId"`
	RequestID   []byte `json:"requestId"`
	GrantedAtMs u64    `json:"grantedAtMs"`
	Metadata    []byte `json:"metadata"`
	Count       uint32 `json:"count"`
	MaxHoldMs   u64    `json:"maxHoldMs"`
	LockDelayMs u64    `json:"lockDelayMs"`
}

func (g *grantJSON) grant() *Grant {
	if g == nil {
		return nil
	}
	out := &Grant{
		Token:     uint64(g.Token),
		Name:      g.Name,
		SessionID: uint64(g.SessionID),
		RequestID: g.RequestID,
		GrantedAt: time.UnixMilli(int64(g.GrantedAtMs)),
		Metadata:  g.Metadata,
		Count:     g.Count,
		MaxHold:   time.Duration(g.MaxHoldMs) * time.Millisecond,
		LockDelay: time.Duration(g.LockDelayMs) * time.Millisecond,
	}
	if g.Mode == "LOCK_MODE_SHARED" {
		out.Mode = Shared
	}
	// Absent from a node older than counted permits: one.
	if out.Count == 0 {
		out.Count = 1
	}
	return out
}

func grants(gs []grantJSON) []Grant {
	out := make([]Grant, 0, len(gs))
	for i := range gs {
		out = append(out, *gs[i].grant())
	}
	return out
}

// newRequestID is a UUID v7 (48 bits of Unix ms, then random bits), so
// that ids sort by creation time in server logs.
func newRequestID() []byte {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		// The kernel's generator does not fail on Linux; fall back to time
		// so that ids stay distinct.
		binary.BigEndian.PutUint64(b[8:], uint64(time.Now().UnixNano()))
	}
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(time.Now().UnixMilli()))
	copy(b[:6], t[2:])
	b[6] = 0x70 | (b[6] & 0x0f)
	b[8] = 0x80 | (b[8] & 0x3f)
	return b
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
