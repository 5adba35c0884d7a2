// Package closing lets packages built on raftlock run work of their own
// before Client.Close closes a session: package leaderelection stops a
// leader's OnStartedLeading there, so that closing the client never hands
// the leadership over while the old leader is still acting on it.
package closing

import (
	"context"
	"sync"
)

// A Hook stops what depends on a session before the session is closed.
// It reports whether that is done; false (ctx ended first) asks Close not
// to end the session on the server but to leave it to expire, which it
// does only after its local deadline has ended what it guarded.
type Hook func(ctx context.Context) bool

var (
	mu    sync.Mutex
	hooks = map[interface{}]map[*Hook]struct{}{}
)

// Add registers h to run before the session key is closed by its client;
// remove unregisters it.
func Add(key interface{}, h Hook) (remove func()) {
	p := &h
	mu.Lock()
	if hooks[key] == nil {
		hooks[key] = map[*Hook]struct{}{}
	}
	hooks[key][p] = struct{}{}
	mu.Unlock()
	return func() {
		mu.Lock()
		delete(hooks[key], p)
		if len(hooks[key]) == 0 {
			delete(hooks, key)
		}
		mu.Unlock()
	}
}

// Run runs key's hooks side by side and tells whether all of them
// finished their work within ctx.
func Run(ctx context.Context, key interface{}) bool {
	mu.Lock()
	hs := make([]Hook, 0, len(hooks[key]))
	for p := range hooks[key] {
		hs = append(hs, *p)
	}
	mu.Unlock()
	ok := true
	var wg sync.WaitGroup
	var okMu sync.Mutex
	for _, h := range hs {
		wg.Add(1)
		go func(h Hook) {
			defer wg.Done()
			if !h(ctx) {
				okMu.Lock()
				ok = false
				okMu.Unlock()
			}
		}(h)
	}
	wg.Wait()
	return ok
}
