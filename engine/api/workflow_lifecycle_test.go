package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
)

func TestConcurrentPushesNumberVersionsWithoutGaps(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	const n = 10
	versions := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := httptest.NewRequest("POST", "/api/v3/workflows", strings.NewReader(tenSteps("busy", "alice", fmt.Sprint("variant ", i))))
			req.Header.Set("user", "alice")
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			if rec.Code != 200 {
				t.Errorf("push %d: %d %s", i, rec.Code, rec.Body)
				return
			}
			var body struct {
				Definition struct {
					Metadata struct {
						Version int64 `json:"workflow_version_id"`
					} `json:"metadata"`
				} `json:"workflow_definition"`
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			versions[i] = body.Definition.Metadata.Version
		})
	}
	wg.Wait()
	slices.Sort(versions)
	for i, v := range versions {
		if v != int64(i+1) {
			t.Fatalf("versions %v are not 1..%d", versions, n)
		}
	}
	r := e.send("GET", "/api/v3/workflows/busy/versions?limit=100", "", "").expect(t, 200)
	if len(r.body["items"].([]any)) != n {
		t.Fatalf("want %d versions listed: %s", n, r.raw)
	}
	// One properties snapshot (the first push); the rest did not change them.
	if s := e.send("GET", "/api/v3/workflows/busy/properties-snapshot/latest", "", "").expect(t, 200); s.num(t, "snapshot_version") != 1 {
		t.Fatalf("want snapshot 1: %s", s.raw)
	}
}

func TestConcurrentFirstPushesOfManyWorkflows(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	var wg sync.WaitGroup
	for i := range 8 {
		for j := range 3 {
			wg.Go(func() {
				req := httptest.NewRequest("POST", "/api/v3/workflows", strings.NewReader(simple(fmt.Sprint("wf", i), fmt.Sprint(j))))
				rec := httptest.NewRecorder()
				e.h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					t.Errorf("push: %d %s", rec.Code, rec.Body)
				}
			})
		}
	}
	wg.Wait()
	for i := range 8 {
		r := e.send("GET", fmt.Sprintf("/api/v3/workflows/wf%d/overview", i), "", "").expect(t, 200)
		if r.num(t, "latest_version_id") != 3 {
			t.Fatalf("wf%d: %s", i, r.raw)
		}
	}
}

func TestGetVersionSelectors(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	for i := range 3 {
		e.send("POST", "/api/v3/workflows", "alice", simple("wf", fmt.Sprint(i))).expect(t, 200)
	}
	for sel, want := range map[string]int64{"1": 1, "2": 2, "3": 3, "latest": 3, "active": 3, "default": 3} {
		if got := e.send("GET", "/api/v3/workflows/wf/versions/"+sel, "", "").expect(t, 200).version(t); got != want {
			t.Errorf("%s: got %d, want %d", sel, got, want)
		}
	}
	for _, sel := range []string{"abc", "0", "-1", "1.5", "LATEST"} {
		e.send("GET", "/api/v3/workflows/wf/versions/"+sel, "", "").expect(t, 400)
	}
	r := e.send("GET", "/api/v3/workflows/wf/versions/99", "", "").expect(t, 404)
	if r.body["status"] != "NOT_FOUND" {
		t.Fatalf("%s", r.raw)
	}
	e.send("GET", "/api/v3/workflows/nope/versions/latest", "", "").expect(t, 404)
	e.send("GET", "/api/v3/workflows/nope/versions/1", "", "").expect(t, 404)
}

func TestListVersionsPagination(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	for i := range 5 {
		e.send("POST", "/api/v3/workflows", "alice", simple("wf", fmt.Sprint(i))).expect(t, 200)
	}
	var seen []int64
	path := "/api/v3/workflows/wf/versions?limit=2"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		r := e.send("GET", path, "", "").expect(t, 200)
		if r.body["workflow_id"] != "wf" {
			t.Fatalf("%s", r.raw)
		}
		for _, it := range r.body["items"].([]any) {
			m := it.(map[string]any)
			seen = append(seen, int64(m["workflow_version_id"].(float64)))
			if m["created_by"] != "alice" || m["step_count"].(float64) != 1 {
				t.Fatalf("summary: %v", m)
			}
			if (m["workflow_version_id"].(float64) == 5) != (m["is_active"] == true) {
				t.Fatalf("only version 5 is active: %v", m)
			}
		}
		next, ok := r.body["next_cursor"].(float64)
		if !ok {
			break
		}
		path = fmt.Sprintf("/api/v3/workflows/wf/versions?limit=2&cursor=%d", int64(next))
	}
	if !slices.Equal(seen, []int64{5, 4, 3, 2, 1}) {
		t.Fatalf("pages gave %v", seen)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "cursor=x", "cursor=-3"} {
		e.send("GET", "/api/v3/workflows/wf/versions?"+q, "", "").expect(t, 400)
	}
	e.send("GET", "/api/v3/workflows/nope/versions", "", "").expect(t, 404)
}

func TestPropertiesMergeAndSnapshots(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send("POST", "/api/v3/workflows", "alice", tenSteps("wf", "alice", "v1")).expect(t, 200)
	// Maestro's answer is the PropertiesSnapshot, the properties inline.
	r := e.send("POST", "/api/v3/workflows/wf/properties", "alice", `{"step_concurrency": 3, "time_trigger_disabled": true}`).expect(t, 200)
	if r.num(t, "snapshot_version") != 2 || r.body["workflow_id"] != "wf" || r.body["author"] != "alice" {
		t.Fatalf("%s", r.raw)
	}
	if r.body["owner"] != "alice" || r.get(t, "run_strategy.rule") != "SEQUENTIAL" || r.body["step_concurrency"] != 3.0 ||
		r.body["time_trigger_disabled"] != true {
		t.Fatalf("merge lost or missed fields: %s", r.raw)
	}
	// The same change again adds nothing.
	r = e.send("POST", "/api/v3/workflows/wf/properties", "alice", `{"step_concurrency": 3}`).expect(t, 200)
	if r.num(t, "snapshot_version") != 2 {
		t.Fatalf("%s", r.raw)
	}
	// Snapshots are kept, and named by number or by create time (Maestro's
	// snapshot id).
	one := e.send("GET", "/api/v3/workflows/wf/properties-snapshot/1", "", "").expect(t, 200)
	if one.body["step_concurrency"] != 10.0 || one.body["author"] != "alice" {
		t.Fatalf("snapshot 1: %s", one.raw)
	}
	byTime := e.send("GET", fmt.Sprintf("/api/v3/workflows/wf/properties-snapshot/%d", one.num(t, "create_time")), "", "").expect(t, 200)
	if byTime.num(t, "snapshot_version") != 1 {
		t.Fatalf("snapshot by create time: %s", byTime.raw)
	}
	latest := e.send("GET", "/api/v3/workflows/wf/properties-snapshot/latest", "", "").expect(t, 200)
	if latest.num(t, "snapshot_version") != 2 || latest.body["step_concurrency"] != 3.0 {
		t.Fatalf("latest: %s", latest.raw)
	}
	// Versions show the current snapshot; a push without properties keeps it.
	v := e.send("POST", "/api/v3/workflows", "alice", simple("wf", "no properties")).expect(t, 200).wd(t)
	if v.num(t, "properties_snapshot.snapshot_version") != 2 || v.get(t, "properties_snapshot.step_concurrency") != 3.0 {
		t.Fatalf("push without properties changed them: %s", v.raw)
	}
	// A push with changed properties adds a snapshot even without a new version.
	body := strings.Replace(tenSteps("wf", "alice", "v1"), `"step_concurrency": 10`, `"step_concurrency": 7`, 1)
	e.send("POST", "/api/v3/workflows", "alice", body).expect(t, 200) // definition changed back from "no properties"
	p := e.send("POST", "/api/v3/workflows", "alice", strings.Replace(body, `"step_concurrency": 7`, `"step_concurrency": 8`, 1)).expect(t, 200)
	if p.body["created"] != false || p.wd(t).num(t, "properties_snapshot.snapshot_version") != 4 ||
		p.wd(t).get(t, "properties_snapshot.step_concurrency") != 8.0 {
		t.Fatalf("properties-only push: %s", p.raw)
	}
	// Bad input.
	e.send("GET", "/api/v3/workflows/wf/properties-snapshot/99", "", "").expect(t, 404)
	e.send("GET", "/api/v3/workflows/wf/properties-snapshot/first", "", "").expect(t, 400)
	e.send("GET", "/api/v3/workflows/nope/properties-snapshot/latest", "", "").expect(t, 404)
	bad := e.send("POST", "/api/v3/workflows/wf/properties", "alice", `{"step_concurency": 3}`).expect(t, 400)
	if !strings.Contains(bad.errorsText(), "step_concurency") {
		t.Fatalf("%s", bad.raw)
	}
	e.send("POST", "/api/v3/workflows/wf/properties", "alice", `{"run_strategy": "whenever"}`).expect(t, 400)
	e.send("POST", "/api/v3/workflows/wf/properties", "alice", `{"step_concurrency": 1000000}`).expect(t, 400)
	e.send("POST", "/api/v3/workflows/wf/properties", "alice", `{"owner": `).expect(t, 400)
	e.send("POST", "/api/v3/workflows/wf/properties", "alice", ``).expect(t, 400)
	e.send("POST", "/api/v3/workflows/nope/properties", "alice", `{"step_concurrency": 3}`).expect(t, 404)
}

func TestOnlyOwnerOrAdminChangesPropertiesOrDeletes(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send("POST", "/api/v3/workflows", "carol", tenSteps("wf", "alice", "v1")).expect(t, 200)
	// alice owns it through properties.owner although carol created it.
	for _, who := range []string{"bob", "carol", ""} {
		r := e.send("POST", "/api/v3/workflows/wf/properties", who, `{"step_concurrency": 2}`).expect(t, 403)
		if r.body["status"] != "FORBIDDEN" || !strings.Contains(r.body["message"].(string), "alice") {
			t.Fatalf("%s", r.raw)
		}
		e.send("DELETE", "/api/v3/workflows/wf", who, "").expect(t, 403)
	}
	// A non-owner may not push a version, whether it changes the
	// properties or not; the refused push writes nothing.
	e.send("POST", "/api/v3/workflows", "alice", tenSteps("wf", "alice", "v2")).expect(t, 200)
	e.send("POST", "/api/v3/workflows", "bob", tenSteps("wf", "alice", "v3")).expect(t, 403)
	r := e.send("POST", "/api/v3/workflows", "bob", tenSteps("wf", "bob", "v3")).expect(t, 403)
	if !strings.Contains(r.body["message"].(string), "owned by alice") {
		t.Fatalf("%s", r.raw)
	}
	if got := e.send("GET", "/api/v3/workflows/wf/versions/latest", "", "").expect(t, 200).version(t); got != 2 {
		t.Fatalf("refused push created version %d", got)
	}
	// The owner and an admin may; ownership moves with properties.owner.
	e.send("POST", "/api/v3/workflows/wf/properties", "alice", `{"step_concurrency": 2}`).expect(t, 200)
	e.send("POST", "/api/v3/workflows/wf/properties", admin, `{"owner": "bob"}`).expect(t, 200)
	e.send("POST", "/api/v3/workflows/wf/properties", "alice", `{"step_concurrency": 4}`).expect(t, 403)
	e.send("POST", "/api/v3/workflows/wf/properties", "bob", `{"step_concurrency": 4}`).expect(t, 200)
	o := e.send("GET", "/api/v3/workflows/wf/overview", "", "").expect(t, 200)
	if o.body["owner"] != "bob" {
		t.Fatalf("owner should be bob: %s", o.raw)
	}
	e.send("DELETE", "/api/v3/workflows/wf", "alice", "").expect(t, 403)
	e.send("DELETE", "/api/v3/workflows/wf", "bob", "").expect(t, 200)
	// An admin may delete anyone's workflow.
	e.send("POST", "/api/v3/workflows", "dave", simple("daves", "x")).expect(t, 200)
	e.send("DELETE", "/api/v3/workflows/daves", admin, "").expect(t, 200)
}

// addInstances inserts runs of a workflow directly, as the engine would
// have left them, each with two step attempts.
func (e *testEnv) addInstances(workflowID string, statuses ...string) {
	e.t.Helper()
	ctx := context.Background()
	for _, st := range statuses {
		var iid int64
		if err := e.pool.QueryRow(ctx, `UPDATE workflow SET latest_instance_id = latest_instance_id + 1
            WHERE workflow_id = $1 RETURNING latest_instance_id`, workflowID).Scan(&iid); err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.pool.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
            group_count, group_id, status, definition, timeout_seconds)
            VALUES ($1, $2, 1, 1, gen_random_uuid(), 8, 0, $3, '{}', 3600)`, workflowID, iid, st); err != nil {
			e.t.Fatal(err)
		}
		for _, step := range []string{"a", "b"} {
			if _, err := e.pool.Exec(ctx, `INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id,
                uuid, status, step_type) VALUES ($1, $2, 1, $3, 1, gen_random_uuid(), 'SUCCEEDED', 'NoOp')`, workflowID, iid, step); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

func (e *testEnv) count(query string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func TestDeleteThen404(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send("POST", "/api/v3/workflows", "alice", tenSteps("wf", "alice", "v1")).expect(t, 200)
	e.send("POST", "/api/v3/workflows", "alice", tenSteps("wf", "alice", "v2")).expect(t, 200)
	e.addInstances("wf", "SUCCEEDED", "FAILED", "STOPPED")
	e.send("POST", "/api/v3/workflows", "alice", simple("other", "x")).expect(t, 200)
	e.addInstances("other", "SUCCEEDED")

	r := e.send("DELETE", "/api/v3/workflows/wf", "alice", "").expect(t, 200)
	if r.body["status"] != "DELETED" || r.num(t, "deleted_instance_runs") != 3 || r.body["type"] != "ACTION" || r.body["action"] != "DELETE" {
		t.Fatalf("%s", r.raw)
	}
	for _, path := range []string{"/versions/latest", "/versions/1", "/versions", "/overview", "/properties-snapshot/latest"} {
		e.send("GET", "/api/v3/workflows/wf"+path, "", "").expect(t, 404)
	}
	e.send("DELETE", "/api/v3/workflows/wf", "alice", "").expect(t, 404)
	e.send("PUT", "/api/v3/workflows/wf/actions/deactivate", "alice", "").expect(t, 404)
	for _, table := range []string{"workflow", "workflow_version", "workflow_properties_snapshot", "workflow_instance", "step_instance"} {
		if n := e.count(`SELECT count(*) FROM ` + table + ` WHERE workflow_id = 'wf'`); n != 0 {
			t.Errorf("%d rows left in %s", n, table)
		}
	}
	// Other workflows are untouched.
	if n := e.count(`SELECT count(*) FROM step_instance WHERE workflow_id = 'other'`); n != 2 {
		t.Fatalf("other workflow lost steps: %d", n)
	}
	// The timeline survives and records the deletion.
	tl := e.send("GET", "/api/v3/workflows/wf/timeline", "", "").expect(t, 200)
	first := tl.body["timeline_events"].([]any)[0].(map[string]any)
	if first["type"] != definition.EventDelete || first["author"] != "alice" {
		t.Fatalf("timeline: %s", tl.raw)
	}
	// The id can be pushed again and starts over.
	again := e.send("POST", "/api/v3/workflows", "bob", simple("wf", "new life")).expect(t, 200)
	if again.version(t) != 1 || again.wd(t).num(t, "properties_snapshot.snapshot_version") != 1 {
		t.Fatalf("%s", again.raw)
	}
}

func TestDeleteRefusesLiveRuns(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send("POST", "/api/v3/workflows", "alice", simple("wf", "x")).expect(t, 200)
	e.addInstances("wf", "SUCCEEDED", "IN_PROGRESS")
	r := e.send("DELETE", "/api/v3/workflows/wf", "alice", "").expect(t, 409)
	if !strings.Contains(r.body["message"].(string), "stop or kill") {
		t.Fatalf("%s", r.raw)
	}
	if n := e.count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'wf'`); n != 2 {
		t.Fatalf("a refused delete removed runs: %d left", n)
	}
	e.send("GET", "/api/v3/workflows/wf/versions/latest", "", "").expect(t, 200)
}

func TestDeleteLargeWorkflowThroughQueue(t *testing.T) {
	t.Parallel()
	e := newTestServer(t, definition.WithInlineDeleteLimit(3), definition.WithDeleteBatchSize(2))
	e.send("POST", "/api/v3/workflows", "alice", simple("big", "x")).expect(t, 200)
	e.addInstances("big", "SUCCEEDED", "FAILED", "SUCCEEDED", "STOPPED", "TIMED_OUT")

	r := e.send("DELETE", "/api/v3/workflows/big", "alice", "").expect(t, 200)
	if r.body["status"] != "DELETING" || r.body["deletion_id"] == "" {
		t.Fatalf("%s", r.raw)
	}
	// The definition is gone at once; the id is blocked until the
	// instances are gone.
	e.send("GET", "/api/v3/workflows/big/versions/latest", "", "").expect(t, 404)
	blocked := e.send("POST", "/api/v3/workflows", "alice", simple("big", "again")).expect(t, 409)
	if blocked.body["retryable"] != true {
		t.Fatalf("push during deletion should be retryable: %s", blocked.raw)
	}
	if n := e.count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'big'`); n != 5 {
		t.Fatalf("instances should wait for the queue: %d", n)
	}
	var payload []byte
	if err := e.pool.QueryRow(context.Background(), `SELECT payload FROM maestro_queue WHERE queue_id = 5`).Scan(&payload); err != nil {
		t.Fatalf("no delete message queued: %v", err)
	}
	ctx := context.Background()
	// An interrupted delivery leaves a consistent state that the next one finishes.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.defs.ProcessDelete(cancelled, payload); err == nil {
		t.Fatal("a cancelled delivery should fail")
	}
	for range 2 { // at least once: the second delivery is a no-op
		if err := e.defs.ProcessDelete(ctx, payload); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range []string{"workflow_instance", "step_instance", "workflow_deletion"} {
		if n := e.count(`SELECT count(*) FROM ` + table); n != 0 {
			t.Errorf("%d rows left in %s", n, table)
		}
	}
	tl := e.send("GET", "/api/v3/workflows/big/timeline", "", "").expect(t, 200)
	var types []string
	for _, it := range tl.body["timeline_events"].([]any) {
		types = append(types, it.(map[string]any)["type"].(string))
	}
	if !slices.Equal(types[:2], []string{definition.EventDeleteCompleted, definition.EventDelete}) {
		t.Fatalf("timeline: %v", types)
	}
	e.send("POST", "/api/v3/workflows", "alice", simple("big", "again")).expect(t, 200)
	if err := e.defs.ProcessDelete(ctx, []byte(`{"workflow_id": 1}`)); err == nil {
		t.Fatal("a malformed message should fail")
	}
}

func TestOverview(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send("POST", "/api/v3/workflows", "alice", tenSteps("wf", "alice", "v1")).expect(t, 200)
	e.send("POST", "/api/v3/workflows", "alice", tenSteps("wf", "alice", "v2")+"").expect(t, 200)
	e.send("POST", "/api/v3/workflows", "alice", strings.Replace(tenSteps("wf", "alice", "v3"), "{\n  \"properties\"", `{"is_active": false, "properties"`, 1)).expect(t, 200)
	o := e.send("GET", "/api/v3/workflows/wf/overview", "", "").expect(t, 200)
	if o.num(t, "active_version_id") != 2 || o.num(t, "latest_version_id") != 3 || o.num(t, "default_version_id") != 2 ||
		o.body["owner"] != "alice" || o.num(t, "properties_snapshot.snapshot_version") != 1 ||
		o.num(t, "instances.latest_instance_id") != 0 || o.num(t, "step_concurrency") != 10 || o.num(t, "failed_instances") != 0 {
		t.Fatalf("%s", o.raw)
	}
	e.addInstances("wf", "SUCCEEDED", "FAILED", "SUCCEEDED", "IN_PROGRESS", "FAILED", "SUCCEEDED")
	// Instance 2 was restarted and its second run succeeded.
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO workflow_instance (workflow_id, instance_id, run_id,
        workflow_version, uuid, group_count, group_id, status, definition, timeout_seconds)
        VALUES ('wf', 2, 2, 1, gen_random_uuid(), 8, 0, 'SUCCEEDED', '{}', 3600)`); err != nil {
		t.Fatal(err)
	}
	o = e.send("GET", "/api/v3/workflows/wf/overview", "", "").expect(t, 200)
	counts := o.get(t, "instances.status_counts").(map[string]any)
	latest := o.get(t, "instances.latest_instance_ids").(map[string]any)
	if o.num(t, "instances.latest_instance_id") != 6 || counts["SUCCEEDED"] != 4.0 || counts["FAILED"] != 1.0 ||
		counts["IN_PROGRESS"] != 1.0 || latest["SUCCEEDED"] != 6.0 || latest["FAILED"] != 5.0 || latest["IN_PROGRESS"] != 4.0 {
		t.Fatalf("%s", o.raw)
	}
	// Maestro's counts: the live instances by status, the failed ones.
	if o.num(t, "latest_instance_id") != 6 || o.num(t, "failed_instances") != 1 || o.num(t, "nonterminal_instances.IN_PROGRESS") != 1 ||
		o.num(t, "nonterminal_instances.CREATED") != 0 || o.num(t, "nonterminal_instances.PAUSED") != 0 {
		t.Fatalf("%s", o.raw)
	}
	e.send("GET", "/api/v3/workflows/nope/overview", "", "").expect(t, 404)
}

func TestActivateAndDeactivate(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send("POST", "/api/v3/workflows", "alice", simple("wf", "1")).expect(t, 200)
	e.send("POST", "/api/v3/workflows", "alice", simple("wf", "2")).expect(t, 200)

	e.send("PUT", "/api/v3/workflows/wf/actions/deactivate", "bob", "").expect(t, 403)
	d := e.send("PUT", "/api/v3/workflows/wf/actions/deactivate", "alice", "").expect(t, 200)
	if d.body["active_version_id"] != nil || d.num(t, "previous_active_version_id") != 2 || d.body["changed"] != true ||
		d.num(t, "workflow_version_id") != 0 || d.get(t, "timeline_event.action") != "DEACTIVATE" {
		t.Fatalf("%s", d.raw)
	}
	if d = e.send("PUT", "/api/v3/workflows/wf/actions/deactivate", admin, "").expect(t, 200); d.body["changed"] != false {
		t.Fatalf("%s", d.raw)
	}
	e.send("GET", "/api/v3/workflows/wf/versions/active", "", "").expect(t, 404)
	e.send("PUT", "/api/v3/workflows/wf/versions/active/actions/activate", "alice", "").expect(t, 404)

	e.send("PUT", "/api/v3/workflows/wf/versions/1/actions/activate", "bob", "").expect(t, 403)
	a := e.send("PUT", "/api/v3/workflows/wf/versions/1/actions/activate", "alice", "").expect(t, 200)
	if a.num(t, "active_version_id") != 1 || a.body["previous_active_version_id"] != nil || a.body["changed"] != true ||
		a.num(t, "workflow_version_id") != 1 || a.get(t, "timeline_event.action") != "ACTIVATE" || a.get(t, "timeline_event.author") != "alice" {
		t.Fatalf("%s", a.raw)
	}
	if a = e.send("PUT", "/api/v3/workflows/wf/versions/1/actions/activate", "alice", "").expect(t, 200); a.body["changed"] != false {
		t.Fatalf("%s", a.raw)
	}
	v := e.send("GET", "/api/v3/workflows/wf/versions/1", "", "").expect(t, 200)
	if v.body["is_active"] != true || v.body["activated_by"] != "alice" || v.body["activate_time"] == nil {
		t.Fatalf("%s", v.raw)
	}
	if a = e.send("PUT", "/api/v3/workflows/wf/versions/latest/actions/activate", "alice", "").expect(t, 200); a.num(t, "active_version_id") != 2 {
		t.Fatalf("%s", a.raw)
	}
	e.send("PUT", "/api/v3/workflows/wf/versions/9/actions/activate", "alice", "").expect(t, 404)
	e.send("PUT", "/api/v3/workflows/wf/versions/first/actions/activate", "alice", "").expect(t, 400)
	e.send("PUT", "/api/v3/workflows/nope/versions/1/actions/activate", "bob", "").expect(t, 404)
	e.send("PUT", "/api/v3/workflows/nope/actions/deactivate", "bob", "").expect(t, 404)

	tl := e.send("GET", "/api/v3/workflows/wf/timeline", "", "").expect(t, 200)
	var types []string
	for _, it := range tl.body["timeline_events"].([]any) {
		types = append(types, it.(map[string]any)["type"].(string))
	}
	want := []string{definition.EventActivate, definition.EventActivate, definition.EventDeactivate,
		definition.EventCreateVersion, definition.EventCreateVersion, definition.EventUpdateProperties}
	if !slices.Equal(types, want) {
		t.Fatalf("timeline %v, want %v", types, want)
	}
}

func TestTimelinePagination(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	for i := range 4 {
		e.send("POST", "/api/v3/workflows", "alice", simple("wf", fmt.Sprint(i))).expect(t, 200)
	}
	// 1 snapshot + 4 versions = 5 events.
	var ids []int64
	path := "/api/v3/workflows/wf/timeline?limit=2"
	for {
		r := e.send("GET", path, "", "").expect(t, 200)
		for _, it := range r.body["timeline_events"].([]any) {
			m := it.(map[string]any)
			ids = append(ids, int64(m["event_id"].(float64)))
			if m["timestamp"] == nil || m["log"] == "" || m["author"] != "alice" {
				t.Fatalf("event %v", m)
			}
		}
		next, ok := r.body["next_cursor"].(float64)
		if !ok {
			break
		}
		path = fmt.Sprintf("/api/v3/workflows/wf/timeline?limit=2&cursor=%d", int64(next))
	}
	if len(ids) != 5 || !sort.SliceIsSorted(ids, func(i, j int) bool { return ids[i] > ids[j] }) {
		t.Fatalf("events %v should be 5, newest first", ids)
	}
	e.send("GET", "/api/v3/workflows/wf/timeline?limit=1000", "", "").expect(t, 400)
	e.send("GET", "/api/v3/workflows/nope/timeline", "", "").expect(t, 404)
}

func TestOpenAPIIsServed(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	r := e.send("GET", "/api/v3/openapi.json", "", "").expect(t, 200)
	if v, _ := r.body["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Fatalf("not an OpenAPI 3 document: %.200s", r.raw)
	}
}

// benchServer is a server for benchmarks. MAESTRO_BENCH_SYNCHRONOUS_COMMIT
// sets synchronous_commit for its connections (the throwaway test cluster
// runs with it off).
func benchServer(b *testing.B) *testEnv {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(dbtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	sc := os.Getenv("MAESTRO_BENCH_SYNCHRONOUS_COMMIT")
	if sc != "" {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = sc
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if sc != "" {
		var got string
		if err := pool.QueryRow(context.Background(), `SHOW synchronous_commit`).Scan(&got); err != nil || got != sc {
			b.Fatalf("synchronous_commit is %q (%v), want %q", got, err, sc)
		}
	}
	return newTestServerOn(b, pool)
}

// benchPush runs body(i) through the handler b.N times and reports the
// median and 99th percentile latency besides the mean.
func benchPush(b *testing.B, e *testEnv, path string, want int, body func(i int) string) {
	b.Helper()
	bodies := make([]string, b.N)
	for i := range bodies {
		bodies[i] = body(i)
	}
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req := httptest.NewRequest("POST", path, strings.NewReader(bodies[i]))
		req.Header.Set("user", "alice")
		rec := httptest.NewRecorder()
		start := time.Now()
		e.h.ServeHTTP(rec, req)
		lat[i] = time.Since(start)
		if rec.Code != want {
			b.Fatalf("push %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkCreateWorkflow pushes a realistic ten-step definition of a new
// workflow through the handler: decode, validate (SEL included), one
// transaction creating the workflow, version 1, properties snapshot 1 and
// two timeline events.
func BenchmarkCreateWorkflow(b *testing.B) {
	e := benchServer(b)
	benchPush(b, e, "/api/v3/workflows", 200, func(i int) string {
		return tenSteps(fmt.Sprintf("bench.wf%d", i), "alice", "v1")
	})
}

// BenchmarkPushNewVersion pushes changed definitions of one workflow, each a
// new version.
func BenchmarkPushNewVersion(b *testing.B) {
	e := benchServer(b)
	benchPush(b, e, "/api/v3/workflows", 200, func(i int) string {
		return tenSteps("bench.wf", "alice", fmt.Sprint("variant ", i))
	})
}

// Out-of-range numbers and durations are refused at push with Maestro's
// error shape and the field's path (issue 27 N5).
func TestPushRefusesOutOfRangeNumbers(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	r := e.send("POST", "/api/v3/workflows", "alice", `{"workflow":{"id":"sleepy","steps":[
		{"step":{"id":"a","type":"Sleep","sleep_seconds":1e18}}]}}`).expect(t, 400)
	if r.body["status"] != "BAD_REQUEST" || r.body["retryable"] != false || r.body["message"] == "" ||
		!strings.Contains(r.errorsText(), "workflow.steps[0].step.sleep_seconds: must be between 0 and 10368000 seconds") {
		t.Fatalf("answer %s", r.raw)
	}
}
