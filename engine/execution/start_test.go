package execution

import (
	"context"
	"testing"

	"github.com/maestro-aws/maestro/engine/instance"
)

// A start answers with the run as run.Create made it, without reading it
// back: what it reports is what the row holds, for an admitted, a queued,
// a dropped and a repeated start.
func TestStartReportsTheRunItCreated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newBatchWorld(t)
	for _, tc := range []struct {
		name, workflow, requestID string
		status                    instance.WorkflowStatus
		queued, duplicated        bool
	}{
		{"admitted", "seq", "a-1", instance.WorkflowCreated, false, false},
		{"queued behind a live run", "seq", "", instance.WorkflowCreated, true, false},
		{"dropped by FIRST_ONLY", "first", "", instance.WorkflowStopped, false, false},
		{"a repeated request id", "seq", "a-1", instance.WorkflowCreated, false, true},
	} {
		res, err := w.svc.Start(ctx, StartRequest{WorkflowID: tc.workflow, Version: "latest", RequestID: tc.requestID})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := res.Instance
		row, err := w.svc.Run(ctx, tc.workflow, got.InstanceID, got.RunID)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.Status != tc.status || got.Queued != tc.queued || res.Duplicated != tc.duplicated {
			t.Errorf("%s: status %s queued %v duplicated %v, want %s %v %v", tc.name, got.Status, got.Queued, res.Duplicated,
				tc.status, tc.queued, tc.duplicated)
		}
		if got.WorkflowID != row.WorkflowID || got.InstanceID != row.InstanceID || got.RunID != row.RunID ||
			got.Version != row.Version || got.UUID != row.UUID || got.Status != row.Status || got.Queued != row.Queued ||
			got.GroupID != row.GroupID || got.groupID != row.groupID || (got.RequestID == nil) != (row.RequestID == nil) ||
			got.RequestID != nil && *got.RequestID != *row.RequestID {
			t.Errorf("%s: the start reported %+v; the row is %+v", tc.name, got, row)
		}
	}
}
