// Command raftlock-go-bench measures the latency of one lock's acquire and
// release through the Go client: one client, one session, one lock name,
// Lock then Unlock in a loop for a while. It prints one JSON line:
//
//	{"ops":1234,"p50_ms":1.9,"p99_ms":4.2,"ops_per_sec":510.3}
//
// where an op is one acquire plus its release.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
)

type result struct {
	Ops       int     `json:"ops"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	OpsPerSec float64 `json:"ops_per_sec"`
}

func main() {
	endpoints := flag.String("endpoints", os.Getenv(raftlock.EnvEndpoints), "comma-separated client addresses (default $RAFTLOCK_ENDPOINTS)")
	duration := flag.Duration("duration", 10*time.Second, "how long to run")
	ttl := flag.Duration("ttl", 10*time.Second, "the session's TTL")
	name := flag.String("name", "bench/go-latency", "the lock's name")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "raftlock-go-bench:", err)
			os.Exit(1)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "raftlock-go-bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*endpoints, *duration, *ttl, *name); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "raftlock-go-bench:", err)
		os.Exit(1)
	}
}

func run(endpoints string, duration, ttl time.Duration, name string) error {
	if strings.TrimSpace(endpoints) == "" {
		return fmt.Errorf("no endpoints: pass -endpoints or set %s", raftlock.EnvEndpoints)
	}
	cfg := raftlock.ConfigFromEnv()
	cfg.Endpoints = strings.Split(endpoints, ",")
	cl, err := raftlock.New(cfg)
	if err != nil {
		return err
	}
	defer cl.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), duration+30*time.Second)
	defer cancel()
	s, err := cl.NewSession(ctx, raftlock.WithTTL(ttl), raftlock.WithClientName("raftlock-go-bench"))
	if err != nil {
		return err
	}
	m := raftlock.NewMutex(s, name)
	// Latencies are kept whole: a run is short, and percentiles need them.
	var lat []time.Duration
	start := time.Now()
	end := start.Add(duration)
	for time.Now().Before(end) {
		t0 := time.Now()
		if err := m.Lock(ctx); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if err := m.Unlock(ctx); err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	r := result{Ops: len(lat)}
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		r.P50Ms = millis(percentile(lat, 0.50))
		r.P99Ms = millis(percentile(lat, 0.99))
		r.OpsPerSec = float64(len(lat)) / elapsed.Seconds()
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// percentile is the nearest-rank percentile of sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func millis(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
