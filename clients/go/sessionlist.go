package raftlock

import (
	"context"
	"time"
)

// SessionInfo is a live session as an operator sees it (Client.ListSessions):
// who it is, since when, what it holds and waits for, and how long it has
// left.
type SessionInfo struct {
	// ID is the session id.
	ID uint64
	// ClientName is the name the client gave itself (WithClientName, or
	// Config.ClientName).
	ClientName string
	// Identity is the authenticated identity that created it; empty
	// without authentication.
	Identity string
	// Host is the machine the client said it runs on; empty if it did not.
	Host string
	// PID is the process id the client gave; 0 if it did not.
	PID uint32
	// CreatedAt is when it was created, on the leader's wall clock.
	CreatedAt time.Time
	// TTL is its time to live without keep-alives.
	TTL time.Duration
	// ExpiresIn is how long the leader would wait without a keep-alive
	// before expiring it, from when the answer was made.
	ExpiresIn time.Duration
	// Held are the locks it holds, by name.
	Held []string
	// Waiting are the locks it waits for, by name.
	Waiting []string
}

// sessionPage is the page size ListSessions asks for: the server's
// largest, so that a listing takes few round trips. Tests make it small to
// see paging work.
var sessionPage uint32 = 1000

// ListSessions returns the live sessions whose client names start with
// clientNamePrefix ("" for all), in creation order. It reads every page,
// each a linearizable read on the leader. With authentication on, an
// identity that may not read every lock sees only its own sessions.
//
//	sessions, err := cli.ListSessions(ctx, "billing")
//	for _, s := range sessions {
//		fmt.Println(s.ID, s.Host, s.PID, s.Held, s.ExpiresIn)
//	}
func (cl *Client) ListSessions(ctx context.Context, clientNamePrefix string) ([]SessionInfo, error) {
	if err := cl.checkOpen(); err != nil {
		return nil, err
	}
	var out []SessionInfo
	var page uint64
	for {
		var r struct {
			Sessions []struct {
				SessionID   u64      `json:"sessionId"`
				ClientName  string   `json:"clientName"`
				Identity    string   `json:"identity"`
				Host        string   `json:"host"`
				PID         uint32   `json:"pid"`
				CreatedAtMs u64      `json:"createdAtMs"`
				TTLMs       u64      `json:"ttlMs"`
				ExpiresInMs u64      `json:"expiresInMs"`
				Held        []string `json:"held"`
				Waiting     []string `json:"waiting"`
			} `json:"sessions"`
			NextPageToken u64 `json:"nextPageToken"`
		}
		body := map[string]interface{}{"clientNamePrefix": clientNamePrefix, "pageToken": str(page), "limit": sessionPage}
		if err := cl.c.call(ctx, "/v1/session/list", callOpts{}, func(int) interface{} { return body }, &r); err != nil {
			return nil, err
		}
		for _, s := range r.Sessions {
			out = append(out, SessionInfo{
				ID:         uint64(s.SessionID),
				ClientName: s.ClientName,
				Identity:   s.Identity,
				Host:       s.Host,
				PID:        s.PID,
				CreatedAt:  time.UnixMilli(int64(s.CreatedAtMs)),
				TTL:        time.Duration(s.TTLMs) * time.Millisecond,
				ExpiresIn:  time.Duration(s.ExpiresInMs) * time.Millisecond,
				Held:       s.Held,
				Waiting:    s.Waiting,
			})
		}
		if r.NextPageToken == 0 {
			return out, nil
		}
		page = uint64(r.NextPageToken)
	}
}
