package execution

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// MaxStatementsPerStart is what a start admitted at once may cost the API
// side (issue 28): BEGIN, the statement that locks the workflow, allocates
// the instance id, reads the version (and finds a repeated request id),
// the statement that checks admission, inserts the run and enqueues its
// start message, and COMMIT.
const MaxStatementsPerStart = 4

// A start admitted at once costs at most MaxStatementsPerStart
// statements, with or without a request id, by a version number or by
// name; a repeat of the same version does not read its definition again.
func TestStartStatementCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, stmts := dbtest.CountingPool(t)
	defs := definition.NewStore(pool)
	d, err := workflow.DecodeJSON([]byte(`{"properties":{"owner":"o","run_strategy":{"rule":"PARALLEL","workflow_concurrency":100}},` +
		`"workflow":{"id":"w","params":{"p":{"type":"STRING","value":"x"}},"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := defs.Create(ctx, d, "o"); err != nil {
		t.Fatal(err)
	}
	svc := New(pool, defs, 4)
	for i, req := range []StartRequest{
		{WorkflowID: "w", Version: "latest"},
		{WorkflowID: "w", Version: "latest"},
		{WorkflowID: "w", Version: "1", RequestID: "r-1"},
		{WorkflowID: "w", Version: "default", RequestID: "r-2", RunParams: workflow.Params{"p": {Type: "STRING", Value: "y"}}},
	} {
		stmts.Reset()
		res, err := svc.Start(ctx, req)
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if res.Duplicated || res.Instance.Queued {
			t.Fatalf("start %d: duplicated %v queued %v, want a run admitted at once", i, res.Duplicated, res.Instance.Queued)
		}
		if n := stmts.Total(); n > MaxStatementsPerStart {
			t.Errorf("start %d (%+v) sent %d statements, want at most %d: %s", i, req, n, MaxStatementsPerStart, heads(stmts.BySQL()))
		}
	}
	if n := svc.startDefs.decodes.Load(); n != 1 {
		t.Errorf("4 starts of one version decoded its definition %d times, want once", n)
	}
	// A new version is read and decoded once, and runs from then on.
	d.Workflow.Params["p"] = workflow.Param{Type: "STRING", Value: "v2"}
	if _, err := defs.Create(ctx, d, "o"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		res, err := svc.Start(ctx, StartRequest{WorkflowID: "w", Version: "latest"})
		if err != nil {
			t.Fatal(err)
		}
		var version int64
		var p string
		if err := pool.QueryRow(ctx, `SELECT workflow_version, definition->'params'->'p'->>'value' FROM workflow_instance
			WHERE workflow_id = 'w' AND instance_id = $1`, res.Instance.InstanceID).Scan(&version, &p); err != nil {
			t.Fatal(err)
		}
		if res.Instance.Version != 2 || version != 2 || p != "v2" {
			t.Errorf("a start after version 2 was pushed ran version %d/%d with p=%q, want 2 with v2", res.Instance.Version, version, p)
		}
	}
	if n := svc.startDefs.decodes.Load(); n != 2 {
		t.Errorf("starts of two versions decoded definitions %d times, want twice", n)
	}
	// The version starts by number run their own version's definition.
	res, err := svc.Start(ctx, StartRequest{WorkflowID: "w", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	var p string
	if err := pool.QueryRow(ctx, `SELECT definition->'params'->'p'->>'value' FROM workflow_instance
		WHERE workflow_id = 'w' AND instance_id = $1`, res.Instance.InstanceID).Scan(&p); err != nil {
		t.Fatal(err)
	}
	if res.Instance.Version != 1 || p != "x" {
		t.Errorf("a start of version 1 ran version %d with p=%q, want 1 with x", res.Instance.Version, p)
	}
	// A repeated request id and a missing version write nothing: the
	// instance id the lock allocated is given back.
	var before int64
	if err := pool.QueryRow(ctx, `SELECT latest_instance_id FROM workflow WHERE workflow_id = 'w'`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if res, err := svc.Start(ctx, StartRequest{WorkflowID: "w", Version: "latest", RequestID: "r-1"}); err != nil || !res.Duplicated || res.Instance.InstanceID != 3 {
		t.Errorf("a repeated request id: %+v, %v; want the duplicate of instance 3", res, err)
	}
	if _, err := svc.Start(ctx, StartRequest{WorkflowID: "w", Version: "9"}); !errors.Is(err, definition.ErrNotFound) {
		t.Errorf("a start of version 9: %v, want not found", err)
	}
	if _, err := svc.Start(ctx, StartRequest{WorkflowID: "w", Version: "active"}); err != nil {
		t.Errorf("a start of the active version: %v", err)
	}
	var after int64
	if err := pool.QueryRow(ctx, `SELECT latest_instance_id FROM workflow WHERE workflow_id = 'w'`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before+1 {
		t.Errorf("latest instance id %d -> %d over a duplicate, a missing version and one run: want +1", before, after)
	}
}

// heads names statements by their first 60 characters, for a failure
// message.
func heads(bySQL map[string]int64) string {
	var out []string
	for sql, n := range bySQL {
		out = append(out, fmt.Sprintf("%d× %.60s", n, sql))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// A burst of concurrent starts shares transactions: 64 starts of 4
// workflows from 64 goroutines cost at most MaxStatementsPerStart
// statements each (far fewer when they group), answer what the rows hold,
// number each workflow's runs without a gap, and a request id two of them
// share makes one run.
func TestConcurrentStartsShareTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, stmts := dbtest.CountingPool(t)
	defs := definition.NewStore(pool)
	for w := range 4 {
		d, err := workflow.DecodeJSON([]byte(fmt.Sprintf(`{"properties":{"owner":"o","run_strategy":{"rule":"PARALLEL","workflow_concurrency":100}},`+
			`"workflow":{"id":"w%d","params":{"p":{"type":"STRING","value":"x"}},"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`, w)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := defs.Create(ctx, d, "o"); err != nil {
			t.Fatal(err)
		}
	}
	svc := New(pool, defs, 4)
	const n = 64
	type answer struct {
		res *StartResult
		err error
	}
	for round := range 3 {
		stmts.Reset()
		out := make([]answer, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				req := StartRequest{WorkflowID: fmt.Sprintf("w%d", i%4), Version: []string{"latest", "1", "default", "active"}[i%4],
					RequestID: fmt.Sprintf("r%d-%d", round, i)}
				if i == 1 {
					req.RequestID = fmt.Sprintf("r%d-%d", round, 5) // the same workflow as start 5
				}
				out[i].res, out[i].err = svc.Start(ctx, req)
			}()
		}
		close(gate)
		wg.Wait()
		total := stmts.Total()
		created := map[string]int{}
		for i, a := range out {
			if a.err != nil {
				t.Fatalf("round %d start %d: %v", round, i, a.err)
			}
			got := a.res.Instance
			row, err := svc.Run(ctx, got.WorkflowID, got.InstanceID, got.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != row.Version || got.UUID != row.UUID || got.Status != row.Status || got.Queued || row.Queued ||
				got.GroupID != row.GroupID || got.Version != 1 {
				t.Errorf("round %d start %d reported %s/%d v%d %s %s queued=%v group %d; the row is v%d %s %s queued=%v group %d", round, i,
					got.WorkflowID, got.InstanceID, got.Version, got.UUID, got.Status, got.Queued, got.GroupID,
					row.Version, row.UUID, row.Status, row.Queued, row.GroupID)
			}
			if !a.res.Duplicated {
				created[got.WorkflowID]++
			}
		}
		if created["w1"] != n/4-1 || created["w0"] != n/4 {
			t.Errorf("round %d created %v, want %d runs of w0 and %d of w1 (two starts shared a request id)", round, created, n/4, n/4-1)
		}
		t.Logf("round %d: %d statements for %d starts", round, total, n)
		// Alone, each start would cost MaxStatementsPerStart; released
		// at once, they group (a loaded machine may leave a few alone).
		if total > n*MaxStatementsPerStart/2 {
			t.Errorf("round %d: %d statements for %d starts, want under %d each (grouped)", round, total, n, MaxStatementsPerStart/2)
		}
		// The stand-in engine ends the runs.
		if _, err := pool.Exec(ctx, `UPDATE workflow_instance SET status = 'SUCCEEDED', seq = seq + 1, end_time = now() WHERE NOT queued`); err != nil {
			t.Fatal(err)
		}
	}
	for w := range 4 {
		var latest, runs int64
		if err := pool.QueryRow(ctx, `SELECT latest_instance_id, (SELECT count(*) FROM workflow_instance i WHERE i.workflow_id = w.workflow_id)
			FROM workflow w WHERE workflow_id = $1`, fmt.Sprintf("w%d", w)).Scan(&latest, &runs); err != nil {
			t.Fatal(err)
		}
		if latest != runs {
			t.Errorf("w%d: latest instance id %d with %d runs, want no gap", w, latest, runs)
		}
	}
}

// The batch path (triggers, signals, backfills) decodes a version's
// definition once, shared with Start, however many batches run it.
func TestBatchStartsDecodeADefinitionOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newBatchWorld(t)
	w.svc.startDefs = newStartDefinitions()
	for range 3 {
		res, err := w.svc.StartBatch(ctx, []BatchStart{{WorkflowID: "consts", Version: 1}, {WorkflowID: "consts", Version: 1}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	if _, err := w.svc.Start(ctx, StartRequest{WorkflowID: "consts", Version: "1"}); err != nil {
		t.Fatal(err)
	}
	if n := w.svc.startDefs.decodes.Load(); n != 1 {
		t.Errorf("3 batches and a start of one version decoded it %d times, want once", n)
	}
}
