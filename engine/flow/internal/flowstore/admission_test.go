package flowstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAdmissionChecksAskedForTogetherRunOnce: while a check of a workflow
// runs, the checks its other runs' ends ask for return at once and are
// folded into one more check, which starts after the running one; a
// workflow's checks never run two at once; another workflow's run beside
// them; an end after they are done gets a check of its own.
func TestAdmissionChecksAskedForTogetherRunOnce(t *testing.T) {
	var s Store
	release := make(chan struct{})
	var mu sync.Mutex
	checks := map[string]int{}
	var inFlight, overlapped atomic.Int32
	s.admissions.check = func(_ context.Context, wf string) {
		if inFlight.Add(1) > 1 && wf == "w" {
			overlapped.Add(1)
		}
		defer inFlight.Add(-1)
		mu.Lock()
		checks[wf]++
		first := checks[wf] == 1 && wf == "w"
		mu.Unlock()
		if first {
			<-release
		}
	}
	ctx := context.Background()
	firstDone := make(chan struct{})
	go func() { s.AdmitIfQueued(ctx, "w"); close(firstDone) }()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return checks["w"] == 1 })
	// Ten more ends of w while its first check runs: each returns at once.
	for range 10 {
		returned := make(chan struct{})
		go func() { s.AdmitIfQueued(ctx, "w"); close(returned) }()
		select {
		case <-returned:
		case <-time.After(5 * time.Second):
			t.Fatal("an end waited for the check another end runs")
		}
	}
	s.AdmitIfQueued(ctx, "other") // not held by w's check
	close(release)
	<-firstDone
	mu.Lock()
	if checks["w"] != 2 || checks["other"] != 1 {
		t.Fatalf("checks %v, want w twice (the running one, then one for the ten ends) and other once", checks)
	}
	mu.Unlock()
	if n := overlapped.Load(); n != 0 {
		t.Fatalf("%d checks of w ran beside another", n)
	}
	s.AdmitIfQueued(ctx, "w")
	mu.Lock()
	defer mu.Unlock()
	if checks["w"] != 3 {
		t.Fatalf("an end after the checks were done: w checked %d times, want 3", checks["w"])
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}
