package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/execution"
)

// accessCase is one action of the caller × action table: a request, the
// role the access table must give its route, and the status its first
// allowed caller gets on a fresh fixture.
type accessCase struct {
	pattern      string
	method, path string
	body         string
	role         string // "owner" or "reader"
	want         int
}

// accessCases covers every route that changes anything (checked by
// TestAccessTableCoversEveryMutatingRoute). Paths refer to authzFixture.
var accessCases = []accessCase{
	{"POST /api/v3/workflows", "POST", "/api/v3/workflows", simple("wf", "v2"), "owner", 200},
	{"POST /api/v3/workflows/yaml", "POST", "/api/v3/workflows/yaml", "Workflow:\n  id: wf\n  jobs:\n    - job: {id: a, type: NoOp}\n", "owner", 200},
	{"PUT /api/v3/workflows/actions/validate", "PUT", "/api/v3/workflows/actions/validate", simple("wf", "v2"), "reader", 200},
	{"PUT /api/v3/workflows/actions/validate/yaml", "PUT", "/api/v3/workflows/actions/validate/yaml", "Workflow:\n  id: wf\n  jobs:\n    - job: {id: a, type: NoOp}\n", "reader", 200},
	{"PUT /api/v3/workflows/{id}/versions/{version}/actions/activate", "PUT", "/api/v3/workflows/wf/versions/1/actions/activate", "", "owner", 200},
	{"PUT /api/v3/workflows/{id}/actions/deactivate", "PUT", "/api/v3/workflows/wf/actions/deactivate", "", "owner", 200},
	{"POST /api/v3/workflows/{id}/properties", "POST", "/api/v3/workflows/wf/properties", `{"step_concurrency": 2}`, "owner", 200},
	{"POST /api/v3/workflows/{id}/properties/tag", "POST", "/api/v3/workflows/wf/properties/tag", `{"name":"tier-1"}`, "owner", 200},
	{"DELETE /api/v3/workflows/{id}/properties/tag/{tag}", "DELETE", "/api/v3/workflows/wf/properties/tag/nightly", "", "owner", 200},
	{"DELETE /api/v3/workflows/{id}", "DELETE", "/api/v3/workflows/wf", "", "owner", 409}, // live runs: the handler refuses
	{"POST /api/v3/workflows/{id}/versions/{version}/actions/start", "POST", "/api/v3/workflows/wf/versions/latest/actions/start", `{"initiator":{"type":"manual","user":"alice"}}`, "operator", 200},
	{"PUT /api/v3/workflows/{id}/instances/{iid}/actions/stop", "PUT", "/api/v3/workflows/wf/instances/2/actions/stop", "", "operator", 200},
	{"PUT /api/v3/workflows/{id}/instances/{iid}/runs/{run}/actions/stop", "PUT", "/api/v3/workflows/wf/instances/2/runs/1/actions/stop", "", "operator", 200},
	{"PUT /api/v3/workflows/{id}/instances/{iid}/runs/{run}/actions/kill", "PUT", "/api/v3/workflows/wf/instances/2/runs/1/actions/kill", "", "operator", 200},
	{"PUT /api/v3/workflows/{id}/instances/{iid}/actions/kill", "PUT", "/api/v3/workflows/wf/instances/2/actions/kill", "", "operator", 200},
	{"PUT /api/v3/workflows/{id}/actions/stop", "PUT", "/api/v3/workflows/wf/actions/stop", "", "operator", 202},
	{"PUT /api/v3/workflows/{id}/actions/kill", "PUT", "/api/v3/workflows/wf/actions/kill", "", "operator", 202},
	{"POST /api/v3/workflows/{id}/instances/{iid}/actions/restart", "POST", "/api/v3/workflows/wf/instances/1/actions/restart", "", "operator", 200},
	{"PUT /api/v3/workflows/{id}/actions/unblock", "PUT", "/api/v3/workflows/wf/actions/unblock", "", "operator", 200},
	{"PUT /api/v3/workflows/{id}/instances/{iid}/actions/unblock", "PUT", "/api/v3/workflows/wf/instances/1/actions/unblock", "", "operator", 200},
	{"PUT /api/v3/workflows/{id}/instances/{iid}/runs/{run}/actions/unblock", "PUT", "/api/v3/workflows/wf/instances/1/runs/1/actions/unblock", "", "operator", 200},
	{"POST /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/restart", "POST", "/api/v3/workflows/wf/instances/1/steps/b/actions/restart", "", "operator", 200},
	{"PUT /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/skip", "PUT", "/api/v3/workflows/wf/instances/3/steps/b/actions/skip", "", "operator", 200},
	{"PUT /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/stop", "PUT", "/api/v3/workflows/wf/instances/3/steps/a/actions/stop", "", "operator", 200},
	{"PUT /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/kill", "PUT", "/api/v3/workflows/wf/instances/3/steps/a/actions/kill", "", "operator", 200},
	{"PUT /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/bypass", "PUT", "/api/v3/workflows/wf/instances/3/steps/a/actions/bypass", "", "operator", 400},
	{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/restart", "POST", "/api/v3/workflows/wf/instances/1/runs/1/steps/b/actions/restart", "", "operator", 200},
	{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/skip", "POST", "/api/v3/workflows/wf/instances/1/runs/1/steps/b/actions/skip", "", "operator", 200},
	{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/stop", "POST", "/api/v3/workflows/wf/instances/3/runs/1/steps/a/actions/stop", "", "operator", 200},
	{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/kill", "POST", "/api/v3/workflows/wf/instances/3/runs/1/steps/a/actions/kill", "", "operator", 200},
	{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/bypass-dependencies", "POST", "/api/v3/workflows/wf/instances/3/runs/1/steps/a/actions/bypass-dependencies", "", "operator", 400},
	{"POST /api/v3/workflows/steps/breakpoints", "POST", "/api/v3/workflows/steps/breakpoints", `{"workflow_id":"wf","step_id":"a"}`, "operator", 200},
	{"DELETE /api/v3/workflows/steps/breakpoints", "DELETE", "/api/v3/workflows/steps/breakpoints?workflowId=wf&stepId=b", "", "operator", 200},
	{"PUT /api/v3/workflows/steps/breakpoints/{id}/instances/{iid}/runs/{run}/steps/{step}/attempts/{attempt}/actions/resume", "PUT", "/api/v3/workflows/steps/breakpoints/wf/instances/3/runs/1/steps/a/attempts/1/actions/resume", "", "operator", 200},
	{"POST /api/v3/workflows/{id}/watermarks/reset", "POST", "/api/v3/workflows/wf/watermarks/reset", `{"table":"a.b","snapshot_id":0}`, "owner", 404}, // no watermark yet
	{"POST /api/v3/workflows/{id}/backfills", "POST", "/api/v3/workflows/wf/backfills", `{"param":"P","values":["a","b"]}`, "operator", 200},
	{"POST /api/v3/backfills/{backfill_id}/actions/{action}", "POST", "/api/v3/backfills/bf1/actions/pause", "", "operator", 200},
	{"POST /api/v3/tag-permits", "POST", "/api/v3/tag-permits", `{"tag":"gpu","max_allowed":3}`, "owner", 200},
	{"DELETE /api/v3/tag-permits/{tag}", "DELETE", "/api/v3/tag-permits/gpu", "", "owner", 200},
	{"PUT /api/v3/output-data", "PUT", "/api/v3/output-data", `{"workflow_id":"wf","workflow_instance_id":3,"workflow_run_id":1,"step_id":"b","step_attempt_id":1,"step_instance_uuid":"11111111-1111-1111-1111-111111111111","step_token":"{{step_token}}","params":{"x":{"type":"LONG","value":1}}}`, "reader", 200},
	{"PUT /api/v3/step-completion", "PUT", "/api/v3/step-completion", `{"workflow_id":"wf","workflow_instance_id":3,"workflow_run_id":1,"step_id":"b","step_attempt_id":1,"step_instance_uuid":"11111111-1111-1111-1111-111111111111","step_token":"{{step_token}}","state":"DONE"}`, "reader", 409},
	{"POST /api/v3/time-triggers/preview", "POST", "/api/v3/time-triggers/preview", `{"time_trigger":{"cron":"0 12 * * *"},"count":2}`, "reader", 200},
	{"POST /api/v3/signals", "POST", "/api/v3/signals", `{"name":"go","params":{"n":1}}`, "reader", 200},
	{"POST /api/v3/signals/messages", "POST", "/api/v3/signals/messages", `{"table_update":{"table":"db.t","snapshot_id":1}}`, "reader", 200},
	{"POST /api/v3/job-templates", "POST", "/api/v3/job-templates", jobTemplate("etl", "v2"), "owner", 200},
	{"POST /api/v3/job-templates/yaml", "POST", "/api/v3/job-templates/yaml", "owner: {name: alice}\nstatus: ACTIVE\nsupport: data-eng\ndefinition: {job_type: etl, step_type: NoOp, version: v3}\n", "owner", 200},
	{"DELETE /api/v3/job-templates/{type}", "DELETE", "/api/v3/job-templates/etl?version=default", "", "owner", 200},
}

// jobTemplate is a job template request for a NoOp job type at a version.
func jobTemplate(jobType, version string) string {
	return fmt.Sprintf(`{"owner":{"name":"alice"},"status":"ACTIVE","support":"data-eng",
		"definition":{"job_type":%q,"step_type":"NoOp","version":%q,"params":{"x":{"value":1,"type":"LONG"}}}}`, jobType, version)
}

// authzFixture is a workflow wf owned by alice with three runs: 1 FAILED
// (a SUCCEEDED, b FAILED), 2 CREATED, 3 IN_PROGRESS with step a PAUSED at a
// breakpoint and step b RUNNING; a breakpoint on step b and a tag permit
// gpu and the default template of job type etl, all alice's.
// It returns the database and a handler that trusts no header: callers come
// from the request context, as behind API Gateway.
func authzFixture(t *testing.T) (*testEnv, http.Handler) {
	t.Helper()
	e := newTestServer(t)
	e.send("POST", "/api/v3/workflows", "alice", `{"workflow":{"id":"wf","steps":[
		{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"}}}},{"step":{"id":"b","type":"NoOp"}}]}}`).expect(t, 200)
	for range 3 {
		e.send("POST", "/api/v3/workflows/wf/versions/latest/actions/start", "alice", "").expect(t, 200)
	}
	ctx := context.Background()
	for _, q := range []string{
		`UPDATE workflow_instance SET status = 'FAILED', end_time = now(), seq = seq + 1 WHERE workflow_id = 'wf' AND instance_id = 1`,
		`INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id, uuid, status, step_type)
		 VALUES ('wf', 1, 1, 'a', 1, gen_random_uuid(), 'SUCCEEDED', 'NoOp'), ('wf', 1, 1, 'b', 1, gen_random_uuid(), 'FATALLY_FAILED', 'NoOp'),
		        ('wf', 3, 1, 'a', 1, gen_random_uuid(), 'PAUSED', 'NoOp'),
		        ('wf', 3, 1, 'b', 1, '11111111-1111-1111-1111-111111111111', 'RUNNING', 'NoOp')`,
		`INSERT INTO step_paused (workflow_id, instance_id, run_id, step_id, attempt_id, group_id)
		 SELECT workflow_id, instance_id, run_id, 'a', 1, group_id FROM workflow_instance WHERE workflow_id = 'wf' AND instance_id = 3`,
		`UPDATE workflow_instance SET status = 'IN_PROGRESS', seq = seq + 1 WHERE workflow_id = 'wf' AND instance_id = 3`,
		`INSERT INTO backfill (backfill_id, workflow_id, workflow_version, param, param_type, format, spec, concurrency,
		     downstream, rerun, status, created_by, partition_count)
		 VALUES ('bf1', 'wf', 1, 'P', 'STRING', 'STRING', '{"values":["x"]}', 1, false, false, 'RUNNING', 'alice', 1)`,
	} {
		if _, err := e.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	e.send("POST", "/api/v3/workflows/steps/breakpoints", "alice", `{"workflow_id":"wf","step_id":"b"}`).expect(t, 200)
	e.send("POST", "/api/v3/tag-permits", "alice", `{"tag":"gpu","max_allowed":1}`).expect(t, 200)
	e.send("POST", "/api/v3/job-templates", "alice", jobTemplate("etl", "default")).expect(t, 200)
	h, err := api.New(api.Config{DB: e.pool, Logger: discardLogger(), Definitions: e.defs,
		Runs: execution.New(e.pool, e.defs, 0), Admins: []string{admin}})
	if err != nil {
		t.Fatal(err)
	}
	return e, h
}

// fingerprint digests what an action could change.
func (e *testEnv) fingerprint(t *testing.T) string {
	t.Helper()
	var fp string
	err := e.pool.QueryRow(context.Background(), `SELECT md5(concat_ws('|',
        (SELECT string_agg(w::text, ',' ORDER BY workflow_id) FROM workflow w),
        (SELECT count(*) FROM workflow_version), (SELECT count(*) FROM workflow_timeline),
        (SELECT string_agg(concat_ws(':', instance_id, run_id, status, seq, initiator::text), ',' ORDER BY instance_id, run_id) FROM workflow_instance),
        (SELECT string_agg(concat_ws(':', step_id, status, seq), ',' ORDER BY instance_id, run_id, step_id) FROM step_instance),
        (SELECT count(*) FROM maestro_queue), (SELECT count(*) FROM step_breakpoint), (SELECT count(*) FROM signal_instance),
        (SELECT string_agg(t::text, ',' ORDER BY tag) FROM tag_permit t),
        (SELECT count(*) FROM step_paused WHERE resumed), (SELECT count(*) FROM step_output_data),
        (SELECT count(*) FROM workflow_properties_snapshot), (SELECT string_agg(j::text, ',' ORDER BY job_type, version) FROM job_template j),
        (SELECT string_agg(b.backfill_id || b.status, ',' ORDER BY backfill_id) FROM backfill b)))`).Scan(&fp)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// call sends a request as caller ("" for none) to h.
func call(t *testing.T, h http.Handler, caller, method, path, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if caller != "" {
		req = req.WithContext(api.WithCaller(req.Context(), caller))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestCallerActionTable is the caller × action table of docs/security.md:
// for every route that changes something, no caller is 401; mallory (who
// owns nothing) is 403 on owner actions and they write nothing; alice (the
// owner) and root (an administrator) are allowed.
func TestCallerActionTable(t *testing.T) {
	t.Parallel()
	for _, c := range accessCases {
		t.Run(c.pattern, func(t *testing.T) {
			t.Parallel()
			e, h := authzFixture(t)
			// A step callback proves it runs the attempt with its token.
			c.body = strings.ReplaceAll(c.body, "{{step_token}}", e.stepToken("11111111-1111-1111-1111-111111111111"))
			before := e.fingerprint(t)
			if code, body := call(t, h, "", c.method, c.path, c.body); code != http.StatusUnauthorized || !strings.Contains(body, `"UNAUTHORIZED"`) {
				t.Fatalf("no caller: %d %s, want 401", code, body)
			}
			first := "alice"
			if c.role == "reader" {
				first = "mallory"
			} else {
				code, body := call(t, h, "mallory", c.method, c.path, c.body)
				if code != http.StatusForbidden || !strings.Contains(body, "owned by alice") {
					t.Fatalf("mallory: %d %s, want 403 naming the owner", code, body)
				}
			}
			if after := e.fingerprint(t); after != before {
				t.Fatal("a refused request changed something")
			}
			if code, body := call(t, h, first, c.method, c.path, c.body); code != c.want {
				t.Fatalf("%s: %d %s, want %d", first, code, body, c.want)
			}
			if code, body := call(t, h, admin, c.method, c.path, c.body); code == http.StatusForbidden || code == http.StatusUnauthorized {
				t.Fatalf("admin: %d %s", code, body)
			}
		})
	}
}

// TestAccessTableCoversEveryMutatingRoute: every route in the source that
// is not a read has an explicit entry in the access table and a row in
// TestCallerActionTable with the same role.
func TestAccessTableCoversEveryMutatingRoute(t *testing.T) {
	t.Parallel()
	rows := map[string]accessCase{}
	for _, c := range accessCases {
		if _, dup := rows[c.pattern]; dup {
			t.Errorf("two rows for %s", c.pattern)
		}
		rows[c.pattern] = c
	}
	mutating := regexp.MustCompile(`^(POST|PUT|PATCH|DELETE) `)
	for _, pattern := range api.SourceRoutes(t) {
		if !mutating.MatchString(pattern) {
			if role := api.RoleOf(pattern); role != "reader" && role != "public" {
				t.Errorf("read %s needs role %s", pattern, role)
			}
			continue
		}
		c, ok := rows[pattern]
		if !ok {
			t.Errorf("%s (role %s) has no row in the caller × action table", pattern, api.RoleOf(pattern))
			continue
		}
		if got := api.RoleOf(pattern); got != c.role {
			t.Errorf("%s: the access table says %s, the test table %s", pattern, got, c.role)
		}
		delete(rows, pattern)
	}
	for pattern := range rows {
		t.Errorf("the caller × action table lists %s, which no route registers", pattern)
	}
}

// Creating what does not exist yet is open to every caller, who owns it
// from then on.
func TestAnyCallerCreatesAndOwnsNewResources(t *testing.T) {
	t.Parallel()
	e, h := authzFixture(t)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v3/workflows", simple("mallorys", "v1")},
		{"POST", "/api/v3/workflows/yaml", "Workflow:\n  id: mallorys-yaml\n  jobs:\n    - job: {id: a, type: NoOp}\n"},
		{"POST", "/api/v3/tag-permits", `{"tag":"mallorys","max_allowed":1}`},
	} {
		if code, body := call(t, h, "mallory", c.method, c.path, c.body); code != 201 && code != 200 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, body)
		}
	}
	if code, body := call(t, h, "alice", "DELETE", "/api/v3/workflows/mallorys", ""); code != 403 {
		t.Fatalf("alice deleting mallory's workflow: %d %s", code, body)
	}
	if code, body := call(t, h, "alice", "DELETE", "/api/v3/tag-permits/mallorys", ""); code != 403 {
		t.Fatalf("alice deleting mallory's tag permit: %d %s", code, body)
	}
	var owner string
	if err := e.pool.QueryRow(context.Background(), `SELECT owner FROM workflow WHERE workflow_id = 'mallorys-yaml'`).Scan(&owner); err != nil || owner != "mallory" {
		t.Fatalf("owner %q %v", owner, err)
	}
}

// The workflow a body names is read exactly as the handler reads it: a
// differently cased key or a second JSON value cannot slip a request past
// the check.
func TestBodyTargetsCannotBeSmuggled(t *testing.T) {
	t.Parallel()
	e, h := authzFixture(t)
	before := e.fingerprint(t)
	for _, body := range []string{
		`{"Workflow_ID":"wf","step_id":"a"}`,
		`{"workflow_id":"nope","workflow_id":"wf","step_id":"a"}`,
		`{"workflow_id":"wf","step_id":"a"} {"workflow_id":"nope"}`,
	} {
		code, resp := call(t, h, "mallory", "POST", "/api/v3/workflows/steps/breakpoints", body)
		if code != 403 && code != 400 {
			t.Errorf("%s: %d %s", body, code, resp)
		}
	}
	for _, body := range []string{`{"TAG":"gpu","max_allowed":9}`, `{"tag":"other","tag":"gpu","max_allowed":9}`} {
		if code, resp := call(t, h, "mallory", "POST", "/api/v3/tag-permits", body); code != 403 {
			t.Errorf("%s: %d %s", body, code, resp)
		}
	}
	// Iteration runs belong to their root workflow.
	if code, resp := call(t, h, "mallory", "PUT", "/api/v3/workflows/wf:1:loop/instances/1/actions/stop", ""); code != 403 {
		t.Errorf("stop of an iteration run: %d %s", code, resp)
	}
	if after := e.fingerprint(t); after != before {
		t.Fatal("a refused request changed something")
	}
}

// A run records its caller as a MANUAL initiator, whatever the body
// claims; stop and kill record who asked on the run's timeline.
func TestRunsRecordTheirCaller(t *testing.T) {
	t.Parallel()
	e, h := authzFixture(t)
	code, body := call(t, h, "root", "POST", "/api/v3/workflows/wf/versions/latest/actions/start",
		`{"initiator":{"type":"MANUAL","user":"alice"}}`)
	if code != 200 {
		t.Fatalf("start: %d %s", code, body)
	}
	var initiator string
	if err := e.pool.QueryRow(context.Background(), `SELECT initiator::text FROM workflow_instance WHERE workflow_id = 'wf' AND instance_id = 4`).Scan(&initiator); err != nil {
		t.Fatal(err)
	}
	if initiator != `{"type": "MANUAL", "user": "root"}` {
		t.Fatalf("initiator %s", initiator)
	}
	for _, bad := range []string{`{"initiator":{"type":"TIME"}}`, `{"initiator":{"type":"SUBWORKFLOW","user":"x"}}`} {
		if code, body := call(t, h, "alice", "POST", "/api/v3/workflows/wf/versions/latest/actions/start", bad); code != 400 {
			t.Errorf("%s: %d %s", bad, code, body)
		}
	}
	if code, body := call(t, h, "alice", "POST", "/api/v3/workflows/wf/instances/1/actions/restart", `{"initiator":{"user":"mallory"}}`); code != 200 {
		t.Fatalf("restart: %d %s", code, body)
	}
	if err := e.pool.QueryRow(context.Background(), `SELECT initiator::text FROM workflow_instance WHERE workflow_id = 'wf' AND instance_id = 1 AND run_id = 2`).Scan(&initiator); err != nil {
		t.Fatal(err)
	}
	if initiator != `{"type": "MANUAL", "user": "alice"}` {
		t.Fatalf("restart initiator %s", initiator)
	}
	if code, body := call(t, h, "alice", "PUT", "/api/v3/workflows/wf/instances/2/actions/stop", ""); code != 200 {
		t.Fatalf("stop: %d %s", code, body)
	}
	var reason string
	if err := e.pool.QueryRow(context.Background(), `SELECT payload->>'reason' FROM maestro_queue WHERE payload->>'action' = 'stop'`).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if reason != "stopped by alice" {
		t.Fatalf("stop reason %q", reason)
	}
}

func init() {
	// The table's paths must be concrete.
	for _, c := range accessCases {
		if strings.Contains(c.path, "{") {
			panic(fmt.Sprintf("access case %s has a pattern path", c.pattern))
		}
	}
}

// access_control.operators shares run rights without making anyone an
// administrator (issue 27): an operator may start and act on the
// workflow's runs, as may a session of an operator role, but not change
// the workflow; a subworkflow step of an operator's workflow may start it.
func TestOperatorsActOnRunsOnly(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send("POST", "/api/v3/workflows", "alice", `{"properties":{"access_control":{"operators":["olivia","arn:aws:iam::1:role/ops"]}},
		"workflow":{"id":"shared","steps":[{"step":{"id":"a","type":"Sleep","sleep_seconds":60}}]}}`).expect(t, 200)
	e.send("POST", "/api/v3/workflows/shared/versions/latest/actions/start", "olivia", "").expect(t, 200)
	e.send("POST", "/api/v3/workflows/shared/versions/latest/actions/start", "arn:aws:sts::1:assumed-role/ops/sam", "").expect(t, 200)
	e.send("PUT", "/api/v3/workflows/shared/instances/1/actions/stop", "olivia", "").expect(t, 200)
	e.send("POST", "/api/v3/workflows/steps/breakpoints", "olivia", `{"workflow_id":"shared","step_id":"a"}`).expect(t, 200)
	for _, c := range []struct{ caller, method, path, body string }{
		{"mallory", "POST", "/api/v3/workflows/shared/versions/latest/actions/start", ""},
		{"olivia", "PUT", "/api/v3/workflows/shared/actions/deactivate", ""},
		{"olivia", "POST", "/api/v3/workflows/shared/properties", `{"access_control":{"operators":["olivia","mallory"]}}`},
		{"olivia", "DELETE", "/api/v3/workflows/shared", ""},
		{"olivia", "POST", "/api/v3/workflows", `{"workflow":{"id":"shared","steps":[{"step":{"id":"b","type":"NoOp"}}]}}`},
	} {
		if r := e.send(c.method, c.path, c.caller, c.body); r.code != 403 {
			t.Errorf("%s %s %s: %d %s, want 403", c.caller, c.method, c.path, r.code, r.raw)
		}
	}
	// A subworkflow step of olivia's workflow may start it; of mallory's not.
	sub := func(id string) string {
		return `{"workflow":{"id":"` + id + `","steps":[{"subworkflow":{"id":"sw","params":{"subworkflow_id":{"type":"STRING","value":"shared"}}}}]}}`
	}
	e.send("POST", "/api/v3/workflows", "olivia", sub("olivias")).expect(t, 200)
	e.send("POST", "/api/v3/workflows", "mallory", sub("mallorys")).expect(t, 403)
	// Operators are a list of principals.
	bad := e.send("POST", "/api/v3/workflows", "alice", `{"properties":{"access_control":{"operators":"olivia"}},
		"workflow":{"id":"odd","steps":[{"step":{"id":"a","type":"NoOp"}}]}}`).expect(t, 400)
	if !strings.Contains(bad.errorsText(), "properties.access_control.operators") {
		t.Errorf("errors %s", bad.errorsText())
	}
}
