package leaderelection_test

import (
	"context"
	"fmt"
	"time"

	raftlock "github.com/raftlock/raftlock/clients/go"
	"github.com/raftlock/raftlock/clients/go/leaderelection"
)

// Run a function only while leading; the context it gets ends before
// anyone else can be elected.
func ExampleRunOrDie() {
	cli, err := raftlock.FromEnv()
	if err != nil {
		panic(err)
	}
	defer cli.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	leaderelection.RunOrDie(ctx, leaderelection.Config{
		Client:   cli,
		Name:     "example/controller",
		Identity: "pod-a",
		TTL:      10 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				fmt.Println("leading")
				cancel() // a real controller works until ctx is done
				<-ctx.Done()
			},
			OnStoppedLeading: func() { fmt.Println("stopped leading") },
		},
	})
	// Output:
	// leading
	// stopped leading
}

// An elector made first, to ask it who leads and for its fencing token.
func ExampleNewLeaderElector() {
	cli, _ := raftlock.FromEnv()
	defer cli.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	var le *leaderelection.LeaderElector
	le, err := leaderelection.NewLeaderElector(leaderelection.Config{
		Client:   cli,
		Name:     "example/elector",
		Identity: "pod-b",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				// Pass le.Token() with every write made as leader.
				fmt.Println("leader:", le.IsLeader(), le.Token() > 0)
				cancel()
				<-ctx.Done()
			},
		},
	})
	if err != nil {
		panic(err)
	}
	le.Run(ctx)
	fmt.Println("after Run:", le.IsLeader())
	// Output:
	// leader: true true
	// after Run: false
}
