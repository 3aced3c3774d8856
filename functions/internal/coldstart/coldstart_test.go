package coldstart

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/groupcount"
)

// A function's cold start fails on a missing, malformed or mismatched
// MAESTRO_GROUP_COUNT instead of defaulting.
func TestGroupCount(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.Pool(t)
	for _, bad := range []string{"", "sixteen", "0"} {
		t.Setenv("MAESTRO_GROUP_COUNT", bad)
		if _, err := GroupCount(ctx, pool, "api"); err == nil || !strings.Contains(err.Error(), "MAESTRO_GROUP_COUNT") {
			t.Errorf("MAESTRO_GROUP_COUNT=%q: err = %v", bad, err)
		}
	}
	t.Setenv("MAESTRO_GROUP_COUNT", "16")
	if n, err := GroupCount(ctx, pool, "api"); err != nil || n != 16 {
		t.Fatalf("GroupCount = %d, %v", n, err)
	}
	t.Setenv("MAESTRO_GROUP_COUNT", "32")
	if _, err := GroupCount(ctx, pool, "timetrigger"); !errors.Is(err, groupcount.ErrMismatch) {
		t.Errorf("mismatch: err = %v, want ErrMismatch", err)
	}
	// Raised since the function was deployed with 16: it follows the
	// database.
	if _, err := groupcount.Raise(ctx, pool, 64, "ops"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MAESTRO_GROUP_COUNT", "16")
	if n, err := GroupCount(ctx, pool, "api"); err != nil || n != 64 {
		t.Errorf("GroupCount after a raise = %d, %v; want 64", n, err)
	}
}
