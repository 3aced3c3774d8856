package run_test

import (
	"context"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// Runs whose run params and params extend a shared object
// (New.RunParamsBase, Local.ParamsBase) store the same JSON as runs given
// the whole objects: the shared members and their own, their own winning
// a name in both. A run without a base stores its own alone, and a run
// created CREATED stores no params whatever its base.
func TestCreateJoinsSharedParamsBases(t *testing.T) {
	pool := dbtest.Pool(t)
	ctx := context.Background()
	const node = "node-a"
	if _, err := pool.Exec(ctx, `INSERT INTO flow_group (group_id, owner, generation) SELECT g, $1, 7 FROM generate_series(0, 3) g`, node); err != nil {
		t.Fatal(err)
	}
	def := []byte(`{"id":"w:1:loop","steps":[]}`)
	sharedRun := []byte(`{"RUN_DATE": {"type": "STRING", "value": "20261128"}, "tz": {"type": "STRING", "value": "UTC"}}`)
	sharedParams := []byte(`{"RUN_DATE": {"type": "STRING", "value": "20261128", "evaluated_result": "20261128"}, "owner": {"value": "tester"}}`)
	ref := func(it int64) run.Ref { return run.Ref{WorkflowID: "w:1:loop", InstanceID: it, RunID: 1} }
	runs := []run.New{
		// Two runs of one base: sent once.
		{Ref: ref(1), Definition: def, GroupCount: 4, Admission: run.Always, RunParams: []byte(`{"loop_index": {"value": 0}}`),
			RunParamsBase: sharedRun, Local: &run.Local{Generation: 7, Params: []byte(`{"workflow_instance_id": {"value": 1}}`), ParamsBase: sharedParams}},
		{Ref: ref(2), Definition: def, GroupCount: 4, Admission: run.Always, RunParams: []byte(`{"loop_index": {"value": 1}, "tz": {"value": "own"}}`),
			RunParamsBase: sharedRun, Local: &run.Local{Generation: 7, Params: []byte(`{"workflow_instance_id": {"value": 2}}`), ParamsBase: sharedParams}},
		// No base.
		{Ref: ref(3), Definition: def, GroupCount: 4, Admission: run.Always, RunParams: []byte(`{"loop_index": {"value": 2}}`),
			Local: &run.Local{Generation: 7, Params: []byte(`{"workflow_instance_id": {"value": 3}}`)}},
		// Not started here (a generation the node does not hold): CREATED, no params.
		{Ref: ref(4), Definition: def, GroupCount: 4, Admission: run.Always, RunParams: []byte(`{"loop_index": {"value": 3}}`),
			RunParamsBase: sharedRun, Local: &run.Local{Generation: 6, Params: []byte(`{"workflow_instance_id": {"value": 4}}`), ParamsBase: sharedParams}},
	}
	out, _ := create(t, pool, runs, run.Options{Node: node, PickedUp: []byte(`[]`)})
	wantStatus := []instance.WorkflowStatus{instance.WorkflowInProgress, instance.WorkflowInProgress, instance.WorkflowInProgress, instance.WorkflowCreated}
	for i, c := range out {
		if !c.Inserted || c.Status != wantStatus[i] {
			t.Fatalf("run %d: %+v, want inserted %s", i+1, c, wantStatus[i])
		}
	}
	want := map[int64][2]string{
		1: {`{"RUN_DATE": {"type": "STRING", "value": "20261128"}, "tz": {"type": "STRING", "value": "UTC"}, "loop_index": {"value": 0}}`,
			`{"RUN_DATE": {"type": "STRING", "value": "20261128", "evaluated_result": "20261128"}, "owner": {"value": "tester"}, "workflow_instance_id": {"value": 1}}`},
		2: {`{"RUN_DATE": {"type": "STRING", "value": "20261128"}, "tz": {"value": "own"}, "loop_index": {"value": 1}}`,
			`{"RUN_DATE": {"type": "STRING", "value": "20261128", "evaluated_result": "20261128"}, "owner": {"value": "tester"}, "workflow_instance_id": {"value": 2}}`},
		3: {`{"loop_index": {"value": 2}}`, `{"workflow_instance_id": {"value": 3}}`},
		4: {`{"RUN_DATE": {"type": "STRING", "value": "20261128"}, "tz": {"type": "STRING", "value": "UTC"}, "loop_index": {"value": 3}}`, `{}`},
	}
	for it, w := range want {
		var same [2]bool
		var got [2]string
		if err := pool.QueryRow(ctx, `SELECT run_params = $2::jsonb, params = $3::jsonb, run_params::text, params::text
            FROM workflow_instance WHERE workflow_id = 'w:1:loop' AND instance_id = $1`, it, w[0], w[1]).Scan(&same[0], &same[1], &got[0], &got[1]); err != nil {
			t.Fatal(err)
		}
		if !same[0] || !same[1] {
			t.Errorf("iteration %d stored run params %s and params %s, want %s and %s", it, got[0], got[1], w[0], w[1])
		}
	}
}
