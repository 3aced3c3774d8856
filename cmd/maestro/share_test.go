package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
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

// Issue 18: the flow group count grows online. Two engines share 16 groups
// with runs in flight; `maestro groups raise --to 32` records the new count;
// at their next heartbeat the engines create and share the 32 groups
// (16/16), the runs in flight finish where they are, and runs started over
// 32 groups (as every process that starts runs does once it follows the new
// count) land in the new groups and finish. Lowering is refused.
func TestGroupCountGrowsOnline(t *testing.T) {
	t.Parallel()
	const lease = 4 * time.Second
	dsn := dbtest.URL(t)
	before := startRuns(t, dsn, 12)
	env := []string{"MAESTRO_GROUP_COUNT=16", "MAESTRO_LEASE=" + lease.String()}
	engineProcess(t, dsn, "node-1", "0", env...)
	engineProcess(t, dsn, "node-2", "0", env...)
	waitOwnedWithin(t, before.pool, map[string]int{"node-1": 8, "node-2": 8}, 3*lease)
	before.waitProgress(t, 4)

	groups := func(args ...string) (string, error) {
		cmd := exec.Command(maestroBinary(t), append([]string{"groups"}, args...)...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := groups("raise", "--to", "32"); err != nil || !strings.Contains(out, "16 -> 32") {
		t.Fatalf("maestro groups raise --to 32: %v: %s", err, out)
	}
	took := waitOwnedWithin(t, before.pool, map[string]int{"node-1": 16, "node-2": 16}, 3*lease)
	t.Logf("the engines hold 16/16 of 32 groups %s after the raise", took.Round(time.Millisecond))
	if out, err := groups("raise", "--to", "24"); err == nil || !strings.Contains(out, "cannot be lowered") {
		t.Errorf("lowering to 24 was not refused: %v: %s", err, out)
	}
	if out, err := groups("show"); err != nil || !strings.Contains(out, "flow group count: 32") {
		t.Errorf("maestro groups show: %v: %s", err, out)
	}

	over32 := execution.New(before.pool, definition.NewStore(before.pool), 32)
	for range 24 {
		res, err := over32.Start(context.Background(), execution.StartRequest{WorkflowID: before.workflowID, Version: "latest"})
		if err != nil {
			t.Fatal(err)
		}
		before.insts = append(before.insts, res.Instance)
	}
	var high int
	if err := before.pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_instance WHERE group_id >= 16`).Scan(&high); err != nil {
		t.Fatal(err)
	}
	if high == 0 {
		t.Fatal("no new run landed in the new groups: the test proves nothing")
	}
	before.checkFinished(t)
}
