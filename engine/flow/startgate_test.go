package flow

import (
	"context"
	"testing"
	"time"
)

// The bound on starts awaiting their commit is 8 near the database and
// grows with the round trip to it, up to 64.
func TestStartsInFlightGrowWithTheRoundTrip(t *testing.T) {
	for _, c := range []struct {
		rt   time.Duration
		want int
	}{
		{0, 8}, {100 * time.Microsecond, 8}, {499 * time.Microsecond, 8}, {700 * time.Microsecond, 16},
		{2100 * time.Microsecond, 40}, {4 * time.Millisecond, 64}, {time.Second, 64},
	} {
		if got := startsInFlight(c.rt); got != c.want {
			t.Errorf("startsInFlight(%v) = %d, want %d", c.rt, got, c.want)
		}
	}
}

// A start waits at the gate while the limit is reached, goes on once one
// is released, and gives up with its context.
func TestStartGateWaitsForARelease(t *testing.T) {
	var g startGate
	ctx := context.Background()
	for range 2 {
		if err := g.acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan error, 1)
	go func() { got <- g.acquire(ctx, 2) }()
	select {
	case err := <-got:
		t.Fatalf("a third start passed a gate of 2 (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting start never went on after a release")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := g.acquire(cctx, 2); err == nil {
		t.Fatal("a start passed a full gate with its context ended")
	}
	if err := g.acquire(ctx, 3); err != nil { // a higher limit lets it in at once
		t.Fatal(err)
	}
}
