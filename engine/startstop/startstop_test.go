package startstop_test

import (
	"context"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/maestro-aws/maestro/engine/startstop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Start does not block; the loops run until Stop, which waits for them;
// Stop is idempotent, a second Start fails, and the caller's cancellation
// does not stop the loops.
func TestRunner(t *testing.T) {
	var r startstop.Runner
	var running, ended atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	loop := func(ctx context.Context) {
		running.Add(1)
		<-ctx.Done()
		ended.Add(1)
	}
	if err := r.Start(ctx, loop, loop); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, loop); err != startstop.ErrStarted {
		t.Fatalf("second start: %v", err)
	}
	cancel()
	for running.Load() < 2 {
	}
	if ended.Load() != 0 {
		t.Fatal("the caller's cancellation stopped the loops")
	}
	r.Stop()
	if ended.Load() != 2 {
		t.Fatalf("%d loops ended by Stop, want 2", ended.Load())
	}
	r.Stop()
	var never startstop.Runner
	never.Stop()
}
