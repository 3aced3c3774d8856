package execution

import (
	"context"
	"fmt"
	"sync"
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

// Concurrent starts of one workflow serialize on its row from the
// statement that allocates their ids: 16 starts with one request id make
// one run (the others are duplicates of it, found before the lock or by the
// unique index after it), and 16 distinct starts number their runs with no
// gap and no repeat.
func TestConcurrentStartsOfOneWorkflow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newBatchWorld(t)
	const n = 16
	type answer struct {
		res *StartResult
		err error
	}
	race := func(requestID func(int) string) []answer {
		out := make([]answer, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				out[i].res, out[i].err = w.svc.Start(ctx, StartRequest{WorkflowID: "par", Version: "latest", RequestID: requestID(i)})
			}()
		}
		close(gate)
		wg.Wait()
		return out
	}
	created, first := 0, int64(0)
	for _, a := range race(func(int) string { return "same" }) {
		if a.err != nil {
			t.Fatalf("start with a shared request id: %v", a.err)
		}
		if !a.res.Duplicated {
			created++
		}
		if first == 0 {
			first = a.res.Instance.InstanceID
		}
		if a.res.Instance.InstanceID != first {
			t.Errorf("a shared request id answered instance %d and %d", first, a.res.Instance.InstanceID)
		}
	}
	if created != 1 {
		t.Errorf("%d starts with one request id created %d runs, want 1", n, created)
	}
	seen := map[int64]bool{first: true}
	for _, a := range race(func(i int) string { return fmt.Sprintf("distinct-%d", i) }) {
		if a.err != nil {
			t.Fatalf("distinct start: %v", a.err)
		}
		if seen[a.res.Instance.InstanceID] {
			t.Errorf("instance id %d given twice", a.res.Instance.InstanceID)
		}
		seen[a.res.Instance.InstanceID] = true
	}
	var latest int64
	if err := w.pool.QueryRow(ctx, `SELECT latest_instance_id FROM workflow WHERE workflow_id = 'par'`).Scan(&latest); err != nil {
		t.Fatal(err)
	}
	if latest != int64(len(seen)) || !seen[1] || !seen[latest] {
		t.Errorf("latest instance id %d after %d runs numbered %v: want 1..%d with no gap", latest, len(seen), seen, len(seen))
	}
}
