// Command raftlock-jepsen-worker is a client process of the raftlock-jepsen
// harness that drives the Go client instead of the Rust one: a drop-in for
// `raftlock-jepsen worker` for the mutex and election workloads.
//
//	raftlock-jepsen-worker worker --endpoints A,B,C --workload mutex --seed N \
//	    --clock-base NS --first-process P --local-address 127.0.0.61
//
// It runs one logical client, as the harness's own worker does: acquire
// (or campaign and proclaim), hold for a few milliseconds or, mostly, past
// the session's TTL while asking the library every 100 ms whether the
// lease still holds, release (or resign). Every op goes to stdout as one
// JSON line of the harness's Op, timed on the harness's clock (nanoseconds
// since --clock-base on CLOCK_MONOTONIC). Every connection comes from
// --local-address, so that the harness's iptables rules can cut this
// process alone off. On SIGTERM it finishes its round, closes its session
// (recorded) and exits 0.
//
// RAFTLOCK_JEPSEN_PLANT_CLIENT=ignore-lease plants the harness's client
// bug: holders never ask whether the lease holds, and act as if it did.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
)

// list is a repeatable, comma-separated flag, as clap's value_delimiter.
type list []string

func (l *list) String() string { return strings.Join(*l, ",") }

func (l *list) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// u64flag is a required unsigned flag: set tells whether it was given.
type u64flag struct {
	v   uint64
	set bool
}

func (f *u64flag) String() string { return strconv.FormatUint(f.v, 10) }

func (f *u64flag) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return errors.New("not an unsigned integer")
	}
	f.v, f.set = v, true
	return nil
}

type args struct {
	endpoints    []string
	workload     string
	seed         uint64
	clockBase    uint64
	firstProcess uint64
	localAddress net.IP
}

// parse reads `[global flags] worker [flags]`: the harness's own command
// line, whose global flags (which a worker has no use for) are accepted
// and ignored.
func parse(argv []string, stderr io.Writer) (*args, error) {
	fs := flag.NewFlagSet("raftlock-jepsen-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var endpoints list
	var seed, clockBase, firstProcess u64flag
	fs.Var(&endpoints, "endpoints", "client endpoints, comma-separated")
	workload := fs.String("workload", "", "workload: mutex or election")
	fs.Var(&seed, "seed", "random seed")
	fs.Var(&clockBase, "clock-base", "the harness's start on CLOCK_MONOTONIC, in ns")
	fs.Var(&firstProcess, "first-process", "the first process id this worker may use")
	local := fs.String("local-address", "", "the local IP its connections come from")
	fs.String("raftlockd", "", "ignored (a global flag of raftlock-jepsen)")
	fs.String("out", "", "ignored (a global flag of raftlock-jepsen)")
	fs.String("loopback-net", "", "ignored (a global flag of raftlock-jepsen)")
	fs.Bool("strict", false, "ignored (a global flag of raftlock-jepsen)")
	if err := fs.Parse(argv); err != nil {
		return nil, err
	}
	if fs.NArg() == 0 || fs.Arg(0) != "worker" {
		return nil, errors.New("usage: raftlock-jepsen-worker worker --endpoints A,B,C --workload mutex|election --seed N --clock-base NS --first-process P [--local-address IP]")
	}
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	a := &args{endpoints: endpoints, workload: *workload, seed: seed.v, clockBase: clockBase.v, firstProcess: firstProcess.v}
	switch {
	case *workload == "":
		return nil, errors.New("--workload is required")
	case names(*workload) == nil:
		return nil, fmt.Errorf("workload %q: this worker runs mutex and election only", *workload)
	case !seed.set:
		return nil, errors.New("--seed is required")
	case !clockBase.set:
		return nil, errors.New("--clock-base is required")
	case !firstProcess.set:
		return nil, errors.New("--first-process is required")
	}
	if *local != "" {
		if a.localAddress = net.ParseIP(*local); a.localAddress == nil {
			return nil, fmt.Errorf("--local-address %q: not an IP address", *local)
		}
	}
	return a, nil
}

func main() {
	// The harness reads stdout; if it is gone, ops are dropped rather than
	// the process killed by the signal, as the Rust worker does.
	signal.Ignore(syscall.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	a, err := parse(os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "raftlock-jepsen-worker:", err)
		}
		os.Exit(2)
	}
	if err := run(a, term); err != nil {
		fmt.Fprintln(os.Stderr, "raftlock-jepsen-worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func run(a *args, term <-chan os.Signal) error {
	cfg := raftlock.Config{
		Endpoints:  a.endpoints,
		ClientName: fmt.Sprintf("raftlock-jepsen-worker-go:%d", a.firstProcess),
		// The Rust worker's settings: a call retries for 5 s at most, a
		// connection opens within 1 s.
		RequestTimeout: 5 * time.Second,
		DialTimeout:    time.Second,
	}
	if a.localAddress != nil {
		cfg.LocalAddr = &net.TCPAddr{IP: a.localAddress}
	}
	cl, err := raftlock.New(cfg)
	if err != nil {
		return err
	}
	rec, err := newRecorder(a.clockBase, a.firstProcess, os.Stdout)
	if err != nil {
		return err
	}
	w := newWorker(cl, rec, a.workload, a.seed, os.Getenv(plantEnv) == "ignore-lease")
	var stop int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(&stop)
	}()
	<-term
	atomic.StoreInt32(&stop, 1)
	<-done
	return nil
}
