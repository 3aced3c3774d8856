package execution

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Concurrent batches with overlapping request ids, each over the workflows
// in its own order (the triggers of several engines firing the same
// schedule, a signal delivered twice): every request id starts exactly
// one run, every batch commits (no deadlock, no unique violation: the
// duplicates are found under the workflow locks, run.FindStarted),
// each duplicate names the run its request id started, and each
// workflow's instance ids are 1..n without a gap.
func TestConcurrentBatchesStartEachRequestIDOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	const workflows, batches, rounds = 12, 4, 6
	for w := range workflows {
		d, err := workflow.DecodeJSON([]byte(fmt.Sprintf(`{"properties":{"owner":"o","run_strategy":{"rule":"PARALLEL","workflow_concurrency":1000}},`+
			`"workflow":{"id":"cw%d","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`, w)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := defs.Create(ctx, d, "o"); err != nil {
			t.Fatal(err)
		}
	}
	svc := New(pool, defs, 4)
	type started struct {
		workflowID, requestID string
		instanceID            int64
		duplicated            bool
	}
	var mu sync.Mutex
	var all []started
	var wg sync.WaitGroup
	errs := make(chan error, batches*rounds)
	for b := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(b), 7))
			for r := range rounds {
				// Each batch starts request ids of this round and the one
				// before (a retry), two per workflow, in its own order,
				// some repeated within the batch.
				var starts []BatchStart
				for w := range workflows {
					for _, rid := range []string{fmt.Sprintf("r%d-a", r), fmt.Sprintf("r%d-b", r), fmt.Sprintf("r%d-a", max(r-1, 0))} {
						starts = append(starts, BatchStart{WorkflowID: fmt.Sprintf("cw%d", w), Version: 1, RequestID: rid,
							Initiator: map[string]any{"type": "TIME"}})
					}
				}
				rng.Shuffle(len(starts), func(i, j int) { starts[i], starts[j] = starts[j], starts[i] })
				res, err := svc.StartBatch(ctx, starts)
				if err != nil {
					errs <- fmt.Errorf("batch %d round %d: %w", b, r, err)
					return
				}
				mu.Lock()
				for i, x := range res {
					if x.Err != nil {
						errs <- fmt.Errorf("batch %d round %d start %d: %w", b, r, i, x.Err)
					}
					all = append(all, started{starts[i].WorkflowID, starts[i].RequestID, x.InstanceID, x.Duplicated})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	// The stored runs: one per (workflow, request id), ids dense.
	rows, err := pool.Query(ctx, `SELECT workflow_id, request_id, instance_id FROM workflow_instance ORDER BY workflow_id, instance_id`)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[[2]string]int64{}
	count := map[string]int64{}
	maxID := map[string]int64{}
	for rows.Next() {
		var id, rid string
		var iid int64
		if err := rows.Scan(&id, &rid, &iid); err != nil {
			t.Fatal(err)
		}
		k := [2]string{id, rid}
		if _, ok := byKey[k]; ok {
			t.Errorf("%s: request id %s started twice", id, rid)
		}
		byKey[k] = iid
		count[id]++
		maxID[id] = max(maxID[id], iid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wantRuns := int64(2 * rounds) // r0-a, r0-b, ..., r5-a, r5-b
	for w := range workflows {
		id := fmt.Sprintf("cw%d", w)
		var latest int64
		if err := pool.QueryRow(ctx, `SELECT latest_instance_id FROM workflow WHERE workflow_id = $1`, id).Scan(&latest); err != nil {
			t.Fatal(err)
		}
		if count[id] != wantRuns || maxID[id] != wantRuns || latest != wantRuns {
			t.Errorf("%s: %d runs, highest instance id %d, latest_instance_id %d; want %d of each (dense, no gap)",
				id, count[id], maxID[id], latest, wantRuns)
		}
	}
	// Every start's answer names the run its request id started, and each
	// request id was created by exactly one start.
	created := map[[2]string]int{}
	for _, s := range all {
		k := [2]string{s.workflowID, s.requestID}
		if byKey[k] != s.instanceID {
			t.Errorf("%s %s: answered instance %d, stored %d", s.workflowID, s.requestID, s.instanceID, byKey[k])
		}
		if !s.duplicated {
			created[k]++
		}
	}
	for k := range byKey {
		if created[k] != 1 {
			t.Errorf("%s %s: %d starts created it, want 1", k[0], k[1], created[k])
		}
	}
}
