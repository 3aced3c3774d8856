package groupcount_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/groupcount"
)

func TestFirstProcessRecordsLaterOnesFollow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.Pool(t)

	if n, err := groupcount.Recorded(ctx, db); err != nil || n != 0 {
		t.Fatalf("fresh database: recorded %d, %v", n, err)
	}
	if n, err := groupcount.Agree(ctx, db, 32, "engine a"); err != nil || n != 32 {
		t.Fatalf("Agree(32) = %d, %v", n, err)
	}
	if n, err := groupcount.Agree(ctx, db, 32, "api"); err != nil || n != 32 {
		t.Fatalf("same count: %d, %v", n, err)
	}
	// Configured below the record (the count was raised since): the
	// database's count wins.
	if n, err := groupcount.Agree(ctx, db, 16, "api"); err != nil || n != 32 {
		t.Fatalf("Agree(16) = %d, %v; want the recorded 32", n, err)
	}
	// Configured above it: raising is an explicit step.
	if _, err := groupcount.Agree(ctx, db, 64, "api"); !errors.Is(err, groupcount.ErrMismatch) ||
		!strings.Contains(err.Error(), "maestro groups raise") {
		t.Fatalf("Agree(64) = %v, want ErrMismatch naming the raise", err)
	}
	if n, _ := groupcount.Recorded(ctx, db); n != 32 {
		t.Errorf("a refused process changed the record to %d", n)
	}
	// An engine without a configured count joins the recorded one.
	if n, err := groupcount.Resolve(ctx, db, 0, 16, "engine b"); err != nil || n != 32 {
		t.Errorf("Resolve(unset) = %d, %v; want the recorded 32", n, err)
	}
	if _, err := groupcount.Agree(ctx, db, 0, "x"); err == nil || errors.Is(err, groupcount.ErrMismatch) {
		t.Errorf("Agree(0) = %v, want a range error", err)
	}
}

func TestRaiseGrowsAndNeverLowers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.Pool(t)
	if before, err := groupcount.Raise(ctx, db, 16, "first"); err != nil || before != 0 {
		t.Fatalf("Raise on a fresh database = %d, %v", before, err)
	}
	if before, err := groupcount.Raise(ctx, db, 64, "ops"); err != nil || before != 16 {
		t.Fatalf("Raise(64) = %d, %v", before, err)
	}
	if before, err := groupcount.Raise(ctx, db, 64, "ops"); err != nil || before != 64 {
		t.Fatalf("Raise(64) again = %d, %v", before, err)
	}
	if _, err := groupcount.Raise(ctx, db, 32, "ops"); !errors.Is(err, groupcount.ErrLowering) {
		t.Fatalf("Raise(32) = %v, want ErrLowering", err)
	}
	if n, _ := groupcount.Recorded(ctx, db); n != 64 {
		t.Errorf("recorded %d, want 64", n)
	}
	if _, err := groupcount.Raise(ctx, db, 5000, "ops"); err == nil {
		t.Error("Raise(5000) accepted")
	}
}

func TestResolveRecordsTheDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.Pool(t)
	if n, err := groupcount.Resolve(ctx, db, 0, 16, "dev"); err != nil || n != 16 {
		t.Fatalf("Resolve = %d, %v", n, err)
	}
	if n, _ := groupcount.Recorded(ctx, db); n != 16 {
		t.Errorf("recorded %d, want the default 16", n)
	}
}

// Processes starting at once with different counts: exactly one count wins;
// those configured below it follow it, those above it are refused.
func TestConcurrentFirstStarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.Pool(t)
	counts := []int{8, 16, 8, 16, 8, 16, 8, 16}
	errs := make([]error, len(counts))
	var wg sync.WaitGroup
	for i, n := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = groupcount.Agree(ctx, db, n, "p")
		}()
	}
	wg.Wait()
	recorded, err := groupcount.Recorded(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range counts {
		if ok := errs[i] == nil; ok != (n <= recorded) {
			t.Errorf("process with %d (recorded %d): err = %v", n, recorded, errs[i])
		}
	}
}
