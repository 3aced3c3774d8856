package backfill

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/maestro-aws/maestro/engine/backfill"
	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, dbtest.LeakOptions()...) }

func TestFromEnv(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	d, err := FromEnv(env(map[string]string{EnvInterval: "150ms", EnvTestPause: "1s"}), nil, logger)
	if err != nil || d.Interval != 150*time.Millisecond || d.TestPause != time.Second {
		t.Fatalf("FromEnv = %+v, %v", d, err)
	}
	for _, bad := range []map[string]string{{EnvInterval: "soon"}, {EnvInterval: "-1s"}, {EnvTestPause: "0s"}} {
		if _, err := FromEnv(env(bad), nil, logger); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
	if err := (&Driver{Logger: logger}).Start(context.Background()); err == nil {
		t.Error("a driver without a store started")
	}
}

// TestDriverPassesAndStops: a started driver drives a backfill at its
// interval, a kick asks for a pass at once, and Stop ends it without
// leaking its goroutine.
func TestDriverPassesAndStops(t *testing.T) {
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	runs := execution.New(pool, defs, 4)
	ctx := context.Background()
	passes := make(chan backfill.DriveStats, 16)
	d := &Driver{Store: backfill.NewStore(pool, defs, runs), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Interval: time.Hour, Passed: func(st backfill.DriveStats) { passes <- st }}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err == nil {
		t.Error("a second Start was accepted")
	}
	// A workflow and a backfill created after the first pass: only a kick
	// (the interval is an hour) drives it.
	d.Kick()
	time.Sleep(100 * time.Millisecond)
	pushAndBackfill(t, pool, defs, runs)
	d.Kick()
	select {
	case st := <-passes:
		if st.Started != 2 {
			t.Fatalf("the kicked pass started %d runs; want 2", st.Started)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no pass after a kick")
	}
	d.Stop()
	d.Stop()
}
