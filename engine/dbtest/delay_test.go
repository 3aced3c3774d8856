package dbtest

import (
	"context"
	"testing"
	"time"
)

// A database reached through the proxy works and each statement pays the
// delay both ways.
func TestDelayedDatabase(t *testing.T) {
	t.Setenv(DelayEnv, "5ms")
	pool := Pool(t)
	ctx := context.Background()
	var one int
	began := time.Now()
	for range 5 {
		if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(began); took < 5*10*time.Millisecond {
		t.Fatalf("5 statements took %v through a 5 ms proxy, want >= 50ms", took)
	}
}
