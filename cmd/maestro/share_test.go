package main

import (
	"syscall"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
)

// Issue 18: engines share the flow groups. A second engine joining one that
// holds all 16 groups gets half of them within a few heartbeats; when one
// is killed, the survivor takes all of its groups at once, within the lease
// plus 2 s; one stopped with SIGTERM hands its groups over at once, well
// before its lease would have run out. Runs in flight finish exactly once
// throughout.
func TestEnginesShareGroupsAndTakeOverAtOnce(t *testing.T) {
	t.Parallel()
	const lease = 4 * time.Second // heartbeats every 800 ms
	dsn := dbtest.URL(t)
	f := startRuns(t, dsn, 12)
	env := []string{"MAESTRO_GROUP_COUNT=16", "MAESTRO_LEASE=" + lease.String()}
	p1 := engineProcess(t, dsn, "node-1", "0", env...)
	waitOwned(t, f.pool, "node-1", 16)

	engineProcess(t, dsn, "node-2", "0", env...)
	join := waitOwnedWithin(t, f.pool, map[string]int{"node-1": 8, "node-2": 8}, 3*lease)
	t.Logf("a joining engine holds its 8 of 16 groups %s after it was started", join.Round(time.Millisecond))

	f.waitProgress(t, 4)
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	takeover := waitOwnedWithin(t, f.pool, map[string]int{"node-2": 16}, 3*lease)
	t.Logf("the survivor holds all 16 groups %s after the kill (lease %s)", takeover.Round(time.Millisecond), lease)
	if takeover > lease+2*time.Second {
		t.Errorf("takeover took %s, more than the lease + 2 s", takeover)
	}
	f.checkFinished(t)

	p3 := engineProcess(t, dsn, "node-3", "0", env...)
	waitOwnedWithin(t, f.pool, map[string]int{"node-2": 8, "node-3": 8}, 3*lease)
	if err := p3.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	handover := waitOwnedWithin(t, f.pool, map[string]int{"node-2": 16}, 3*lease)
	t.Logf("after a SIGTERM the other engine holds all 16 groups within %s", handover.Round(time.Millisecond))
	if handover >= lease {
		t.Errorf("a clean stop's groups were taken after %s, as if they had expired (lease %s)", handover, lease)
	}
	if err := p3.Wait(); err != nil {
		t.Errorf("engine did not exit cleanly on SIGTERM: %v", err)
	}
}
