package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// maxStatementsPerAPIStart is what a start admitted at once may cost
// through the REST API with an authenticated caller (issue 28): the
// start's own four (execution.MaxStatementsPerStart), the caller's
// authorization decided on the owner and operators the start's lock
// statement returns (no statement of its own).
const maxStatementsPerAPIStart = 4

// createCountedWorkflow pushes wf, owned by alice, with olivia an
// operator.
func createCountedWorkflow(t testing.TB, e *testEnv, id string) {
	t.Helper()
	d, err := workflow.DecodeJSON([]byte(`{"properties":{"owner":"alice","run_strategy":{"rule":"PARALLEL","workflow_concurrency":1000},` +
		`"access_control":{"operators":["olivia"]}},"workflow":{"id":"` + id + `","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.defs.Create(context.Background(), d, "alice"); err != nil {
		t.Fatal(err)
	}
}

// A start through the REST API by its owner, an operator or an
// administrator costs the start's four statements: the authorization is
// decided on what the lock statement returns.
func TestStartThroughTheAPIStatementCount(t *testing.T) {
	t.Parallel()
	pool, stmts := dbtest.CountingPool(t)
	e := newTestServerOn(t, pool)
	createCountedWorkflow(t, e, "wf")
	for i, c := range []struct{ caller, body string }{
		{"alice", ""}, {"alice", `{"request_id":"r-1"}`}, {"alice", `{"run_params":{"x":{"type":"STRING","value":"y"}}}`},
		{"olivia", ""}, {admin, ""},
	} {
		stmts.Reset()
		r := e.send("POST", "/api/v3/workflows/wf/versions/latest/actions/start", c.caller, c.body).expect(t, 200)
		if r.body["status"] != "CREATED" {
			t.Fatalf("start %d: %s", i, r.raw)
		}
		if n := stmts.Total(); n > maxStatementsPerAPIStart {
			t.Errorf("start %d by %s through the API sent %d statements, want at most %d: %v",
				i, c.caller, n, maxStatementsPerAPIStart, stmts.BySQL())
		}
	}
}

// A start its caller may not make is refused under the workflow's lock
// and rolled back: no run, no instance id spent, no start message; and a
// change of the workflow's operators takes effect at the next start.
func TestStartAuthorizedUnderTheLock(t *testing.T) {
	t.Parallel()
	pool, stmts := dbtest.CountingPool(t)
	e := newTestServerOn(t, pool)
	createCountedWorkflow(t, e, "wf")
	ctx := context.Background()
	counts := func() (latest, runs, messages int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT (SELECT latest_instance_id FROM workflow WHERE workflow_id = 'wf'),
			(SELECT count(*) FROM workflow_instance WHERE workflow_id = 'wf'), (SELECT count(*) FROM maestro_queue)`).
			Scan(&latest, &runs, &messages); err != nil {
			t.Fatal(err)
		}
		return
	}
	start := "/api/v3/workflows/wf/versions/latest/actions/start"
	e.send("POST", start, "alice", "").expect(t, 200)
	l0, r0, m0 := counts()
	stmts.Reset()
	r := e.send("POST", start, "mallory", `{"request_id":"m-1"}`).expect(t, 403)
	if !strings.Contains(r.str+string(r.raw), "alice") {
		t.Errorf("the refusal does not name the owner: %s", r.raw)
	}
	if n := stmts.Total(); n > maxStatementsPerAPIStart {
		t.Errorf("a refused start sent %d statements: %v", n, stmts.BySQL())
	}
	if l, rs, m := counts(); l != l0 || rs != r0 || m != m0 {
		t.Errorf("a refused start wrote: latest instance id %d → %d, runs %d → %d, messages %d → %d", l0, l, r0, rs, m0, m)
	}
	// Without a user header the caller is "anonymous": refused too.
	e.send("POST", start, "", "").expect(t, 403)
	// A start of a workflow that does not exist is 404 for anyone.
	e.send("POST", "/api/v3/workflows/nope/versions/latest/actions/start", "mallory", "").expect(t, 404)
	// mallory made an operator: her next start is allowed; removed, refused.
	e.send("POST", "/api/v3/workflows/wf/properties", "alice", `{"access_control":{"operators":["mallory"]}}`).expect(t, 200)
	e.send("POST", start, "mallory", "").expect(t, 200)
	e.send("POST", start, "olivia", "").expect(t, 403)
	e.send("POST", "/api/v3/workflows/wf/properties", "alice", `{"access_control":{"operators":[]}}`).expect(t, 200)
	e.send("POST", start, "mallory", "").expect(t, 403)
}

// Concurrent starts through the API share transactions (group commit):
// a caller refused in a group is refused alone, the others start.
func TestGroupedStartsAuthorizeEachCaller(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	createCountedWorkflow(t, e, "wf")
	const n = 24
	codes := make(chan int, n)
	for i := range n {
		caller := []string{"alice", "olivia", "mallory"}[i%3]
		go func() {
			codes <- e.send("POST", "/api/v3/workflows/wf/versions/latest/actions/start", caller, "").code
		}()
	}
	got := map[int]int{}
	for range n {
		got[<-codes]++
	}
	if got[200] != 2*n/3 || got[403] != n/3 {
		t.Errorf("answers %v, want %d × 200 and %d × 403", got, 2*n/3, n/3)
	}
	var runs int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_instance WHERE workflow_id = 'wf'`).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	if runs != 2*n/3 {
		t.Errorf("%d runs, want %d", runs, 2*n/3)
	}
}

// BenchmarkAPIStart: starts one at a time through the REST API's handler
// by the workflow's owner, and the statements each sends (stmts/start,
// BEGIN and COMMIT included). Every 500 starts the runs are ended off the
// clock (and uncounted), so that every start is admitted at once.
func BenchmarkAPIStart(b *testing.B) {
	pool, stmts := dbtest.CountingPool(b)
	e := newTestServerOn(b, pool)
	createCountedWorkflow(b, e, "wf")
	b.ResetTimer()
	stmts.Reset()
	var uncounted int64
	for i := range b.N {
		if i > 0 && i%500 == 0 {
			b.StopTimer()
			before := stmts.Total()
			if _, err := pool.Exec(context.Background(), `UPDATE workflow_instance SET status = 'SUCCEEDED', seq = seq + 1, end_time = now()
				WHERE status = 'CREATED'`); err != nil {
				b.Fatal(err)
			}
			uncounted += stmts.Total() - before
			b.StartTimer()
		}
		req := httptest.NewRequest("POST", "/api/v3/workflows/wf/versions/latest/actions/start", strings.NewReader(""))
		req.Header.Set("user", "alice")
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("start %d: %d %s", i, w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(stmts.Total()-uncounted)/float64(b.N), "stmts/start")
}
