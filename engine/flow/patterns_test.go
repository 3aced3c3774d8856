package flow_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

type interval struct {
	name       string
	start, end time.Time
}

// stepInterval reads when a step's latest attempt started and ended.
func (e *env) stepInterval(inst *execution.Instance, stepID string) interval {
	e.t.Helper()
	var iv interval
	if err := e.pool.QueryRow(context.Background(), `SELECT start_time, end_time FROM step_instance
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 ORDER BY attempt_id DESC LIMIT 1`,
		inst.WorkflowID, inst.InstanceID, inst.RunID, stepID).Scan(&iv.start, &iv.end); err != nil {
		e.t.Fatal(err)
	}
	iv.name = fmt.Sprintf("%s/%d/%s", inst.WorkflowID, inst.InstanceID, stepID)
	return iv
}

// expectSerial fails if two intervals overlap.
func expectSerial(t *testing.T, ivs []interval) {
	t.Helper()
	slices.SortFunc(ivs, func(a, b interval) int { return a.start.Compare(b.start) })
	for i := 1; i < len(ivs); i++ {
		if ivs[i].start.Before(ivs[i-1].end) {
			t.Errorf("%s started at %s, before %s ended at %s", ivs[i].name, ivs[i].start.Format(time.StampMilli),
				ivs[i-1].name, ivs[i-1].end.Format(time.StampMilli))
		}
	}
}

// A permit written on a step's tag serialises the steps carrying the tag
// across workflows and engine nodes; the others wait in
// WAITING_FOR_PERMITS and no permit is left held.
func TestTagPermitSerialisesStepsAcrossWorkflowsAndNodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{MaxGroups: testGroups / 2})
	e.engine(flow.Config{MaxGroups: testGroups / 2})
	var runs []*execution.Instance
	for _, id := range []string{"pa", "pb", "pc"} {
		e.push(fmt.Sprintf(`{"workflow":{"id":%q,"steps":[
		    {"step":{"id":"free","type":"NoOp","transition":{"successors":{"gpu":"true"}}}},
		    {"step":{"id":"gpu","type":"Sleep","sleep_seconds":0.6,"tags":["shared",{"name":"gpu","permit":1}]}}]}}`, id))
	}
	for _, id := range []string{"pa", "pb", "pc"} {
		runs = append(runs, e.start(id, nil))
	}
	sawWaiting := false
	for _, inst := range runs {
		if got := e.wait(inst, 30*time.Second); got.Status != instance.WorkflowSucceeded {
			t.Fatalf("%s ended %s", inst.WorkflowID, got.Status)
		}
	}
	var ivs []interval
	for _, inst := range runs {
		ivs = append(ivs, e.stepInterval(inst, "gpu"))
		steps, err := e.runs.Steps(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			if s.StepID == "gpu" && strings.Contains(string(s.Timeline), "waiting for a permit of tag gpu") {
				sawWaiting = true
			}
		}
	}
	expectSerial(t, ivs)
	if !sawWaiting {
		t.Error("no step recorded waiting for a permit")
	}
	var held int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM tag_permit_held`).Scan(&held); err != nil || held != 0 {
		t.Fatalf("%d permits still held (err %v)", held, err)
	}
}

// Permits of attempts that ended without releasing them (a crash) do not
// count and are dropped, and a stopped waiting step ends without one.
func TestLeakedPermitsAreIgnoredAndWaitersStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `INSERT INTO tag_permit (tag, max_allowed) VALUES ('db', 1)`); err != nil {
		t.Fatal(err)
	}
	// A leftover of an attempt that ended without releasing its permit.
	e.push(`{"workflow":{"id":"ended","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	if got := e.wait(e.start("ended", nil), 20*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("ended %s", got.Status)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO tag_permit_held (tag, step_uuid, workflow_id, instance_id, run_id, step_id, attempt_id)
        SELECT 'db', uuid, workflow_id, instance_id, run_id, step_id, attempt_id FROM step_instance WHERE workflow_id = 'ended'`); err != nil {
		t.Fatal(err)
	}
	// Two workflows: runs of one workflow would queue behind each other.
	e.push(`{"workflow":{"id":"lk","steps":[{"step":{"id":"s","type":"Sleep","sleep_seconds":30,"tags":["db"]}}]}}`)
	e.push(`{"workflow":{"id":"lk2","steps":[{"step":{"id":"s","type":"Sleep","sleep_seconds":30,"tags":["db"]}}]}}`)
	first := e.start("lk", nil)
	e.waitRunning(first)
	second := e.start("lk2", nil)
	deadline := time.Now().Add(10 * time.Second)
	for e.stepStatuses(second)["s"] != instance.StepWaitingForPermits {
		if time.Now().After(deadline) {
			t.Fatalf("second run's step is %s", e.stepStatuses(second)["s"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := e.runs.Act(ctx, "lk2", second.InstanceID, 0, run.ActionStop); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(second, 20*time.Second); got.Status != instance.WorkflowStopped {
		t.Fatalf("waiting run ended %s", got.Status)
	}
	if _, err := e.runs.Act(ctx, "lk", first.InstanceID, 0, run.ActionStop); err != nil {
		t.Fatal(err)
	}
	e.wait(first, 20*time.Second)
	var held int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM tag_permit_held`).Scan(&held); err != nil || held != 0 {
		t.Fatalf("%d permits still held (err %v)", held, err)
	}
}

// A step paused at a breakpoint stays paused when its engine dies and
// another takes the run over, and resumes there when the breakpoint goes.
func TestPausedStepSurvivesTakeover(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	first := e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"bpt","steps":[
	    {"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"}}}},
	    {"step":{"id":"b","type":"NoOp"}}]}}`)
	if _, err := e.pool.Exec(ctx, `INSERT INTO step_breakpoint (workflow_id, step_id) VALUES ('bpt', 'b')`); err != nil {
		t.Fatal(err)
	}
	inst := e.start("bpt", nil)
	deadline := time.Now().Add(10 * time.Second)
	for e.stepStatuses(inst)["b"] != instance.StepPaused {
		if time.Now().After(deadline) {
			t.Fatalf("b is %s", e.stepStatuses(inst)["b"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.Crash()
	e.engine(flow.Config{})
	// Still paused on the new owner.
	time.Sleep(3 * time.Second)
	if st := e.stepStatuses(inst)["b"]; st != instance.StepPaused {
		t.Fatalf("after the takeover b is %s", st)
	}
	// What DELETE /api/v3/workflows/steps/breakpoints does.
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM step_breakpoint WHERE workflow_id = 'bpt'`); err != nil {
			return err
		}
		var group int32
		if err := tx.QueryRow(ctx, `UPDATE step_paused SET resumed = true WHERE workflow_id = 'bpt' RETURNING group_id`).Scan(&group); err != nil {
			return err
		}
		_, err := queue.Enqueue(ctx, tx, queue.StepUpdate, group, run.StepUpdateMessage{
			Ref: run.Ref{WorkflowID: "bpt", InstanceID: inst.InstanceID, RunID: inst.RunID}, Group: group, StepID: "b"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.wait(inst, 20*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", got.Status)
	}
	if n := len(e.attempts(inst, "b")); n != 1 {
		t.Fatalf("b has %d attempts", n)
	}
}
