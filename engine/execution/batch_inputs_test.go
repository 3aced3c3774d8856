package execution

import (
	"context"
	"errors"
	"testing"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// A batch decides its starts' inputs from the definitions cached for
// their workflows while PostgreSQL reads the versions (StartBatchTx);
// when the cached definition is another version's, the inputs are decided
// again from the version the start runs: its param modes and its timeout.
func TestBatchStartDecidesInputsFromTheVersionRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newBatchWorld(t)
	defs := definition.NewStore(w.pool)
	push := func(params, timeout string) {
		d, err := workflow.DecodeJSON([]byte(`{"properties":{"owner":"o"},"workflow":{"id":"vers"` + params + timeout +
			`,"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := defs.Create(ctx, d, "o"); err != nil {
			t.Fatal(err)
		}
	}
	push("", `,"timeout":"2h"`)                                                                     // version 1
	push(`,"params":{"locked":{"type":"STRING","value":"a","mode":"CONSTANT"}}`, `,"timeout":"3h"`) // version 2
	locked := workflow.Params{"locked": {Type: workflow.ParamTypeString, Value: "b"}}
	timeout := func(instanceID int64) int64 {
		t.Helper()
		var s int64
		if err := w.pool.QueryRow(ctx, `SELECT timeout_seconds FROM workflow_instance WHERE workflow_id = 'vers' AND instance_id = $1`,
			instanceID).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The cache holds version 1's definition; the batch runs version 2.
	res, err := w.svc.StartBatch(ctx, []BatchStart{{WorkflowID: "vers", Version: 1}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("version 1: %v %+v", err, res)
	}
	res, err = w.svc.StartBatch(ctx, []BatchStart{{WorkflowID: "vers", Version: 2, RunParams: locked}, {WorkflowID: "vers", Version: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, ErrInvalid) {
		t.Errorf("version 2 overriding its constant: %+v, want ErrInvalid", res[0])
	}
	if res[1].Err != nil || res[1].InstanceID != 2 || timeout(2) != 3*3600 {
		t.Errorf("version 2: %+v with timeout %d s, want instance 2 with version 2's 3h", res[1], timeout(2))
	}
	// The cache now holds version 2's; the batch runs version 1.
	res, err = w.svc.StartBatch(ctx, []BatchStart{{WorkflowID: "vers", Version: 1}})
	if err != nil || res[0].Err != nil || res[0].InstanceID != 3 || timeout(3) != 2*3600 {
		t.Errorf("version 1 again: %v %+v with timeout %d s, want instance 3 with version 1's 2h", err, res, timeout(3))
	}
}
