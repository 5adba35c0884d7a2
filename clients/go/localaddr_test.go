package raftlock

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Source-based rules (a firewall cutting one client off) only see the
// address the connections come from, so every call must come from it.
func TestConnectionsComeFromTheLocalAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		seen = append(seen, host)
		mu.Unlock()
		w.Header().Set("content-type", "application/json")
		_, _ = w.Write([]byte(`{"nodeId":"1","role":"ROLE_LEADER"}`))
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	// Any address of 127.0.0.0/8 is the loopback on Linux; elsewhere only
	// 127.0.0.1 may be configured.
	local := net.ParseIP("127.0.0.2")
	if probe, err := net.ListenTCP("tcp", &net.TCPAddr{IP: local}); err != nil {
		local = net.ParseIP("127.0.0.1")
	} else {
		probe.Close()
	}
	cl, err := New(Config{Endpoints: []string{ln.Addr().String()}, LocalAddr: &net.TCPAddr{IP: local}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer cl.Close(ctx)
	for i := 0; i < 2; i++ {
		if _, err := cl.Status(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("%d calls seen", len(seen))
	}
	for _, h := range seen {
		if h != local.String() {
			t.Fatalf("a call came from %s, not %s", h, local)
		}
	}
}

func TestALocalAddressOtherThanTCPIsRefused(t *testing.T) {
	_, err := New(Config{Endpoints: []string{"127.0.0.1:7000"}, LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.0.0.1")}})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("%v", err)
	}
}
