package event_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Every status change of every run and step attempt, across the patterns
// that change statuses (success, retries, failure, stop of a running and
// of a queued run, run strategies that drop or supersede runs, a restart
// that skips a step, subworkflow and foreach children), is in exactly one
// event, in order, and the forwarder delivers them in position order even
// when its sink fails now and then.
func TestEveryStatusChangeIsOneEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Engine(nil, flow.Config{})
	c := e.forward("test")
	c.mu.Lock()
	c.fail = 2 // the sink refuses its first two batches: they come again
	c.mu.Unlock()
	ctx := context.Background()

	e.PushAs(`{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"mix","steps":[
		{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true","c":"true"}}}},
		{"step":{"id":"b","type":"Sleep","sleep_seconds":0.1}},
		{"step":{"id":"c","type":"Fail","failure_mode":"IGNORE_FAILURE",
		  "retry_policy":{"error_retry_limit":1,"backoff":{"type":"FIXED_BACKOFF","error_retry_backoff_in_secs":0}}}}]}}`, "tester")

	e.PushAs(`{"workflow":{"id":"fails","steps":[
		{"step":{"id":"x","type":"Fail","retry_policy":{"error_retry_limit":0},"transition":{"successors":{"y":"true"}}}},
		{"step":{"id":"y","type":"NoOp"}}]}}`, "tester")

	e.PushAs(`{"workflow":{"id":"slow","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":30}}]}}`, "tester")
	e.PushAs(`{"properties":{"owner":"tester","run_strategy":"FIRST_ONLY"},"workflow":{"id":"first","steps":[
		{"step":{"id":"nap","type":"Sleep","sleep_seconds":30}}]}}`, "tester")

	e.PushAs(`{"properties":{"owner":"tester","run_strategy":"LAST_ONLY"},"workflow":{"id":"last","steps":[
		{"step":{"id":"nap","type":"Sleep","sleep_seconds":30}}]}}`, "tester")

	e.PushAs(`{"workflow":{"id":"child","steps":[{"step":{"id":"k","type":"NoOp"}}]}}`, "tester")
	e.PushAs(`{"workflow":{"id":"parent","steps":[
		{"subworkflow":{"id":"sw","params":{"subworkflow_id":{"type":"STRING","value":"child"}},
		  "transition":{"successors":{"loop":"true"}}}},
		{"foreach":{"id":"loop","params":{"loop_params":{"type":"MAP","value":{"i":{"type":"LONG_ARRAY","value":[1,2,3]}}}},
		  "steps":[{"step":{"id":"body","type":"NoOp"}}]}}]}}`, "tester")

	mix := e.Start("mix")
	fails := e.Start("fails")
	parent := e.Start("parent")
	slow1 := e.Start("slow")
	slow2 := e.Start("slow") // queued behind slow1 (SEQUENTIAL)
	first1 := e.Start("first")
	first2 := e.Start("first") // dropped by FIRST_ONLY
	last1 := e.Start("last")
	last2 := e.Start("last") // queued; stops last1
	last3 := e.Start("last") // supersedes last2

	if got := e.Wait(mix, time.Minute); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("mix ended %s", got.Status)
	}
	if got := e.Wait(fails, time.Minute); got.Status != instance.WorkflowFailed {
		t.Fatalf("fails ended %s", got.Status)
	}
	if got := e.Wait(parent, time.Minute); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent ended %s", got.Status)
	}
	// Skip the failed step of the ended run: a restart that records it
	// SKIPPED.
	res, err := e.Runs.StepAct(ctx, "fails", fails.InstanceID, 0, "x", run.StepSkip)
	if err != nil {
		t.Fatal(err)
	}
	e.Wait(res.Restarted, time.Minute)
	if _, err := e.Runs.Act(ctx, "slow", slow2.InstanceID, 0, run.ActionStop); err != nil {
		t.Fatal(err)
	}
	e.Wait(slow2, time.Minute)
	if _, err := e.Runs.ActOnAll(ctx, "slow", run.ActionStop); err != nil {
		t.Fatal(err)
	}
	e.Wait(slow1, time.Minute)
	for _, inst := range []*execution.Instance{first2, last1, last2} {
		if got := e.Wait(inst, time.Minute); got.Status != instance.WorkflowStopped {
			t.Fatalf("%s/%d ended %s, want STOPPED", inst.WorkflowID, inst.InstanceID, got.Status)
		}
	}
	for _, wf := range []string{"first", "last"} {
		if _, err := e.Runs.ActOnAll(ctx, wf, run.ActionKill); err != nil {
			t.Fatal(err)
		}
	}
	e.Wait(first1, time.Minute)
	e.Wait(last3, time.Minute)

	e.drained(c)
	rep, err := c.got.Verify(ctx, e.Pool, "mix", "fails", "slow", "first", "last", "child", "parent")
	if err != nil {
		t.Fatal(err)
	}
	if rep.InstanceChanges < 20 || rep.StepChanges < 60 {
		t.Errorf("checked only %+v", rep)
	}
	evs, _ := c.snapshot()
	for i := 1; i < len(evs); i++ {
		if !evs[i-1].Position.Less(evs[i].Position) {
			t.Fatalf("delivered out of position order: %s then %s", evs[i-1].EventID(), evs[i].EventID())
		}
	}
	t.Logf("%+v", rep)
}

// A one-step run's events: its start, one per write of its step, and its
// end; several status changes written at once are one event. A NoOp step
// runs inline and is written once (CREATED ... SUCCEEDED); a step whose
// runtime runs on the worker pool is written in STARTING before its call,
// then RUNNING ... SUCCEEDED.
func TestOneStepRunEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		step   string
		events int
	}{
		{`{"step":{"id":"s","type":"NoOp"}}`, 3},
		{`{"step":{"id":"s","type":"Sleep","sleep_seconds":0}}`, 4},
	} {
		e := newEnv(t)
		e.PushAs(`{"workflow":{"id":"one","steps":[`+tc.step+`]}}`, "tester")
		before := e.outboxSize()
		inst := e.Start("one")
		e.Engine(nil, flow.Config{})
		e.Wait(inst, time.Minute)
		c := e.forward("test")
		e.drained(c)
		rep, err := c.got.Verify(context.Background(), e.Pool, "one")
		if err != nil {
			t.Fatal(err)
		}
		if n := e.outboxSize() - before; n != tc.events || rep.StepChanges != 9 || rep.InstanceChanges != 2 {
			t.Errorf("%s: %d events for %+v, want %d events for 9 step and 2 run status changes", tc.step, n, rep, tc.events)
		}
	}
}

// The definition changes are events of Maestro's types, with the versions
// they name.
func TestDefinitionChangeEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.forward("test")
	ctx := context.Background()
	def := `{"properties":{"owner":"tester"},"workflow":{"id":"wf","name":"The WF","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`
	e.PushAs(def, "tester")                                                                                                         // version 1, snapshot 1
	e.PushAs(`{"workflow":{"id":"wf","name":"The WF","steps":[{"step":{"id":"s2","type":"NoOp"}}]}}`, "tester")                     // version 2
	e.PushAs(`{"properties":{"step_concurrency":5},"workflow":{"id":"wf","steps":[{"step":{"id":"s3","type":"NoOp"}}]}}`, "tester") // 3 + snapshot 2
	if _, err := e.Defs.UpdateProperties(ctx, "wf", workflow.PropertiesChange{Set: &workflow.Properties{Description: ptr("d")}}, definition.Actor{Name: "tester"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Defs.Activate(ctx, "wf", "1", definition.Actor{Name: "tester"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Defs.Deactivate(ctx, "wf", definition.Actor{Name: "tester"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Defs.Delete(ctx, "wf", definition.Actor{Name: "tester"}); err != nil {
		t.Fatal(err)
	}
	flowtest.WaitFor(t, 30*time.Second, "7 events", func() bool { return c.count() >= 7 })
	evs, types := c.snapshot()
	want := []event.Type{event.WorkflowDefinitionChange, event.WorkflowVersionChange, event.WorkflowDefinitionChange,
		event.WorkflowPropertiesChange, event.WorkflowActivationChange, event.WorkflowDeactivationChange, event.WorkflowDeletionChange}
	if !slices.Equal(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
	got := make([]event.WorkflowChangeEvent, len(evs))
	for i, ev := range evs {
		b, _, err := event.Render(event.Wire(ev), "", "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		got[i] = decode[event.WorkflowChangeEvent](t, b)
	}
	check := func(i int, field string, have *int64, want int64) {
		t.Helper()
		if have == nil || *have != want {
			t.Errorf("event %d (%s) %s = %v, want %d", i, types[i], field, deref(have), want)
		}
	}
	check(0, "version_id", got[0].VersionID, 1)
	check(0, "snapshot_id", got[0].SnapshotID, 1)
	check(0, "current_active_version_id", got[0].CurrentActiveVersionID, 1)
	check(0, "previous_active_version_id", got[0].PreviousActiveVersionID, 0)
	check(1, "version_id", got[1].VersionID, 2)
	check(1, "previous_active_version_id", got[1].PreviousActiveVersionID, 1)
	check(2, "snapshot_id", got[2].SnapshotID, 2)
	check(3, "snapshot_id", got[3].SnapshotID, 3)
	check(4, "current_active_version_id", got[4].CurrentActiveVersionID, 1)
	check(4, "previous_active_version_id", got[4].PreviousActiveVersionID, 3)
	check(5, "previous_active_version_id", got[5].PreviousActiveVersionID, 1)
	if got[6].InternalID == nil || *got[6].InternalID <= 0 {
		t.Errorf("deletion has no internal_id: %+v", got[6])
	}
	if got[1].WorkflowName != "The WF" || got[0].Author != "tester" {
		t.Errorf("name %q, author %q", got[1].WorkflowName, got[0].Author)
	}
	// A push that changes nothing is no event.
	before := e.outboxSize()
	e.PushAs(`{"workflow":{"id":"other","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`, "tester")
	e.PushAs(`{"workflow":{"id":"other","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`, "tester")
	if n := e.outboxSize() - before; n != 1 {
		t.Errorf("%d events for a push and an identical push, want 1", n)
	}
}

func ptr[T any](v T) *T { return &v }

func deref(p *int64) string {
	if p == nil {
		return "absent"
	}
	return fmt.Sprint(*p)
}
