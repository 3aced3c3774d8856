package scheduler

import (
	"context"
	"testing"

	"github.com/maestro-aws/maestro/engine/ops"
)

// While an operator has paused every trigger (maestro ops triggers pause)
// a due trigger fires nothing; once resumed it fires its due time.
func TestPausedTriggersFireNothingUntilResumed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.clock.Set(utc(2024, 5, 1, 9, 59, 30))
	w.push(t, "paused", `[{"type":"CRON","cron":"* * * * *","timezone":"UTC"}]`)
	s := w.scheduler(t, Config{})
	store := ops.New(w.pool)
	if _, err := store.SetTriggersPaused(context.Background(), true, "ops", "maintenance"); err != nil {
		t.Fatal(err)
	}
	w.clock.Set(utc(2024, 5, 1, 10, 0, 2))
	if st := mustFire(t, s); st.Claimed != 0 || st.Started != 0 || !st.Paused {
		t.Fatalf("paused: stats %+v, want nothing claimed and Paused", st)
	}
	if runs := w.runsOf(t, "paused"); len(runs) != 0 {
		t.Fatalf("%d runs started while paused", len(runs))
	}
	if _, err := store.SetTriggersPaused(context.Background(), false, "ops", ""); err != nil {
		t.Fatal(err)
	}
	if st := mustFire(t, s); st.Started != 1 || st.Paused {
		t.Fatalf("resumed: stats %+v, want the due fire time started", st)
	}
	if runs := w.runsOf(t, "paused"); len(runs) != 1 || runs[0].runTS != utc(2024, 5, 1, 10, 0, 0).UnixMilli() {
		t.Errorf("runs after resuming: %+v", runs)
	}
}
