// Package raftlock is the Go client of raftlock, a Raft-replicated lock
// server: sessions kept alive in the background, mutexes with fencing
// tokens and a server-side FIFO queue, shared locks and counting
// semaphores, sets of locks taken together, watches of lock changes,
// leader election, and rate limits. It speaks the server's
// HTTP/JSON API and uses only the standard library.
//
// The shapes follow etcd's clientv3/concurrency (NewSession, NewMutex,
// NewElection) and, in the leaderelection subpackage, client-go's
// leaderelection (RunOrDie with callbacks).
//
//	cli, err := raftlock.FromEnv() // RAFTLOCK_ENDPOINTS, RAFTLOCK_CACERT, RAFTLOCK_AUTH_TOKEN
//	s, err := cli.NewSession(ctx, raftlock.WithTTL(10*time.Second))
//	m := raftlock.NewMutex(s, "payments/settle")
//	if err := m.Lock(ctx); err != nil { ... }
//	defer m.Unlock(ctx)
//	write(data, m.Token()) // the resource refuses tokens lower than the highest it saw
//
// A session counts as valid only until the send time of its last
// acknowledged keep-alive + TTL − SafetyMargin(TTL); past that Done (and
// every Mutex's Lost) is closed, before the leader could have expired the
// session and granted its locks to anyone else. Errors carry the server's
// machine-readable reason; match them with errors.Is and the Err*
// sentinels.
package raftlock
