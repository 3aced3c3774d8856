package groupcount_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/groupcount"
)

func TestFirstProcessRecordsLaterOnesMustAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.Pool(t)

	if n, err := groupcount.Recorded(ctx, db); err != nil || n != 0 {
		t.Fatalf("fresh database: recorded %d, %v", n, err)
	}
	if err := groupcount.Agree(ctx, db, 32, "engine a"); err != nil {
		t.Fatal(err)
	}
	if err := groupcount.Agree(ctx, db, 32, "api"); err != nil {
		t.Fatalf("same count refused: %v", err)
	}
	err := groupcount.Agree(ctx, db, 16, "api")
	if !errors.Is(err, groupcount.ErrMismatch) {
		t.Fatalf("mismatch: err = %v, want ErrMismatch", err)
	}
	if n, _ := groupcount.Recorded(ctx, db); n != 32 {
		t.Errorf("a refused process changed the record to %d", n)
	}
	// An engine without a configured count joins the recorded one.
	if n, err := groupcount.Resolve(ctx, db, 0, 16, "engine b"); err != nil || n != 32 {
		t.Errorf("Resolve(unset) = %d, %v; want the recorded 32", n, err)
	}
	if _, err := groupcount.Resolve(ctx, db, 8, 16, "engine c"); !errors.Is(err, groupcount.ErrMismatch) {
		t.Errorf("Resolve(8) = %v, want ErrMismatch", err)
	}
	if err := groupcount.Agree(ctx, db, 0, "x"); err == nil || errors.Is(err, groupcount.ErrMismatch) {
		t.Errorf("Agree(0) = %v, want a range error", err)
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

// Processes starting at once with different counts: exactly one count wins
// and every process that disagrees with it is refused.
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
			errs[i] = groupcount.Agree(ctx, db, n, "p")
		}()
	}
	wg.Wait()
	recorded, err := groupcount.Recorded(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range counts {
		if ok := errs[i] == nil; ok != (n == recorded) {
			t.Errorf("process with %d (recorded %d): err = %v", n, recorded, errs[i])
		}
	}
}
