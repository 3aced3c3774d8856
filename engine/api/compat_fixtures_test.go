package api_test

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

const fixturesDir = "maestro-common/src/testFixtures/resources/fixtures/"

// requestFixture is one of Maestro's request fixtures (a definition or a
// request body) and how Maestro's API takes it.
type requestFixture struct {
	file string
	// send sends the fixture's body to its endpoint, after whatever the
	// request needs exists, and returns the answer.
	send func(e *testEnv, repo, body string) response
	// rejected: Maestro refuses it (400).
	rejected bool
}

// pushFixture pushes a workflow definition fixture.
func pushFixture(e *testEnv, _, body string) response {
	return e.send(http.MethodPost, "/api/v3/workflows", "tester", body)
}

// validateStep checks a typed step fixture inside a workflow that has the
// steps it names as successors and the params its fields read.
func validateStep(e *testEnv, _, body string) response {
	wf := `{"workflow": {"id": "typed-step", "params": {"foo": {"value": 3, "type": "LONG"}, "bar": {"value": 4, "type": "LONG"},
	  "bat": {"value": 2, "type": "LONG"}, "far": {"value": 10, "type": "LONG"}, "baz": {"value": 1000, "type": "LONG"}},
	  "steps": [` + body + `, {"step": {"id": "job.2", "type": "NoOp"}}, {"step": {"id": "job3", "type": "NoOp"}}]}}`
	return e.send(http.MethodPut, "/api/v3/workflows/actions/validate", "tester", wf)
}

// validateLoop checks a foreach or while step fixture as a workflow's only
// step (its successors are inside it).
func validateLoop(e *testEnv, _, body string) response {
	return e.send(http.MethodPut, "/api/v3/workflows/actions/validate", "tester",
		`{"workflow": {"id": "loop-step", "steps": [`+body+`]}}`)
}

// withFixtureWorkflow pushes Maestro's sample-active-wf-with-props fixture
// (its params are those the request fixtures override) and runs it once.
func withFixtureWorkflow(e *testEnv, repo string, run bool) {
	e.send(http.MethodPost, "/api/v3/workflows", "tester",
		referenceFile(e.t.(*testing.T), repo, fixturesDir+"workflows/request/sample-active-wf-with-defaults.json"))
	if run {
		e.send(http.MethodPost, "/api/v3/workflows/sample-active-wf-with-defaults/versions/latest/actions/start", fixtureOwner, `{}`)
		e.waitTerminalWithin("/api/v3/workflows/sample-active-wf-with-defaults/instances/1", time.Minute)
	}
}

// to returns a sender of the fixture body to method path once the fixture
// workflow exists (and has run, when run is set).
func to(method, path string, run bool) func(*testEnv, string, string) response {
	return func(e *testEnv, repo, body string) response {
		withFixtureWorkflow(e, repo, run)
		// As the workflow's owner (its properties name "demo"): Maestro's
		// open source server checks no ownership.
		return e.send(method, path, fixtureOwner, body)
	}
}

const (
	fixtureWF    = "/api/v3/workflows/sample-active-wf-with-defaults"
	fixtureOwner = "demo"
)

// maestroRequestFixtures are Maestro's definition and request fixtures.
var maestroRequestFixtures = []requestFixture{
	{file: "workflows/request/sample-active-wf-with-defaults.json", send: pushFixture},
	{file: "workflows/request/sample-active-wf-with-output-signals.json", send: pushFixture},
	{file: "workflows/request/sample-active-wf-with-props-no-alerting.json", send: pushFixture},
	{file: "workflows/request/sample-active-wf-with-props.json", send: pushFixture},
	{file: "workflows/request/sample-active-wf-with-signal-triggers.json", send: pushFixture},
	{file: "workflows/request/sample-active-wf-with-step-signal-dependencies.json", send: pushFixture},
	{file: "workflows/request/sample-active-wf-without-props.json", send: pushFixture},
	{file: "workflows/request/sample-conditional-wf.json", send: pushFixture},
	{file: "workflows/request/sample-dag-test-1-wf.json", send: pushFixture},
	{file: "workflows/request/sample-dag-test-2-wf.json", send: pushFixture},
	{file: "workflows/request/sample-dag-test-3-wf.json", send: pushFixture},
	{file: "workflows/request/sample-dag-with-cycle-wf.json", send: pushFixture, rejected: true},
	{file: "workflows/request/sample-inactive-wf-with-props.json", send: pushFixture},
	{file: "workflows/request/sample-inactive-wf-without-props.json", send: pushFixture},
	{file: "workflows/request/sample-invalid-cron-wf-def.json", send: pushFixture, rejected: true},
	{file: "workflows/request/sample-invalid-wf-def.json", send: pushFixture, rejected: true},
	{file: "workflows/request/sample-invalid-wf-dry-run-failure.json", send: pushFixture, rejected: true},
	{file: "workflows/request/sample-invalid-wf.json", send: pushFixture, rejected: true},
	{file: "workflows/request/sample-minimal-wf-with-auth-metadata.json", send: pushFixture},
	{file: "workflows/request/sample-minimal-wf-without-owner.json", send: pushFixture},
	{file: "workflows/request/sample-minimal-wf-without-props.json", send: pushFixture},
	{file: "workflows/request/sample-minimal-wf.json", send: pushFixture},
	{file: "workflows/request/sample-single-node-wf.json", send: pushFixture},
	{file: "api/sample-workflow-create-request.json", send: pushFixture},
	{file: "api/sample-workflow-create-request-params.json", send: pushFixture},
	{file: "typedsteps/sample-foreach-step.json", send: validateLoop},
	{file: "typedsteps/sample-step-with-param-retries.json", send: validateStep},
	{file: "typedsteps/sample-step-with-retries.json", send: validateStep},
	{file: "typedsteps/sample-typed-step.json", send: validateStep},
	{file: "typedsteps/sample-typed-step-invalid.json", send: validateStep, rejected: true},
	{file: "typedsteps/sample-while-step.json", send: validateLoop},
	{file: "api/sample-workflow-start-request.json", send: to(http.MethodPost, fixtureWF+"/versions/latest/actions/start", false)},
	{file: "api/sample-workflow-restart-request.json", send: to(http.MethodPost, fixtureWF+"/instances/1/actions/restart", true)},
	// The step restart fixtures override foo, auu, aaa and bbb: job.3 (a
	// foreach) defines none of them (job.1 defines foo MUTABLE_ON_START,
	// which Maestro too refuses to loosen).
	{file: "api/sample-step-restart-request.json", send: to(http.MethodPost, fixtureWF+"/instances/1/steps/job.3/actions/restart", true)},
	{file: "api/sample-step-restart-request-from-root.json", send: to(http.MethodPost, fixtureWF+"/instances/1/steps/job.3/actions/restart", true)},
	{file: "api/sample-workflow-properties-update-request.json", send: to(http.MethodPost, fixtureWF+"/properties", false)},
	{file: "api/sample-workflow-properties-update-request-reset.json", send: to(http.MethodPost, fixtureWF+"/properties", false)},
	// Maestro's controller refuses a breakpoint that names a version, an
	// instance, a run or an attempt; this API sets it (for the instance
	// the fixture names, which the run creates).
	{file: "api/sample-breakpoint-create-request.json", send: to(http.MethodPost, "/api/v3/workflows/steps/breakpoints", true)},
	{file: "workflows/stepbreakpoint/sample-breakpoint-create-valid-request.json", send: to(http.MethodPost, "/api/v3/workflows/steps/breakpoints", false)},
	{file: "workflows/stepbreakpoint/sample-breakpoint-create-invalid-request.json", send: to(http.MethodPost, "/api/v3/workflows/steps/breakpoints", false)}, // accepted here too
	{file: "api/sample-tag-permit-request.json", send: to(http.MethodPost, "/api/v3/tag-permits", false)},
	{file: "api/sample-signal-create-request.json", send: to(http.MethodPost, "/api/v3/signals", false)},
	{file: "api/sample-job-template-create-request.json", send: to(http.MethodPost, "/api/v3/job-templates", false)},
	{file: "api/sample-output-data-request.json", send: sendOutputData},
}

// sendOutputData sends the output data fixture for a running step, with
// the attempt's identity added (this API requires it; Maestro's reads it
// from the caller's credentials).
func sendOutputData(e *testEnv, _, body string) response {
	e.send(http.MethodPost, "/api/v3/workflows", "tester",
		`{"workflow": {"id": "workflow-foo", "steps": [{"step": {"id": "job", "type": "Sleep", "sleep_seconds": 600}}]}}`)
	e.send(http.MethodPost, "/api/v3/workflows/workflow-foo/versions/latest/actions/start", "tester", `{}`)
	att := e.waitAttempt("/api/v3/workflows/workflow-foo/instances/1/runs/1/steps/job/attempts/latest", "RUNNING")
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		e.t.Fatal(err)
	}
	m["workflow_instance_id"], m["workflow_run_id"], m["step_id"], m["step_attempt_id"] = 1, 1, "job", 1
	m["step_instance_uuid"] = att.body["step_uuid"]
	m["step_token"] = e.stepToken(att.body["step_uuid"].(string))
	out, _ := json.Marshal(m)
	return e.send(http.MethodPut, "/api/v3/output-data", "tester", string(out))
}

// TestMaestroRequestFixtures sends every Maestro definition and request
// fixture unchanged to the endpoint that takes it: accepted unless Maestro
// refuses it too.
func TestMaestroRequestFixtures(t *testing.T) {
	repo := referenceRepo(t)
	out, err := exec.Command("git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD", fixturesDir).Output()
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, f := range maestroRequestFixtures {
		listed[f.file] = true
	}
	for _, f := range strings.Fields(string(out)) {
		f = strings.TrimPrefix(f, fixturesDir)
		isRequest := strings.HasPrefix(f, "workflows/request/") || strings.HasPrefix(f, "typedsteps/") ||
			strings.HasPrefix(f, "workflows/stepbreakpoint/") || (strings.HasPrefix(f, "api/") && strings.Contains(f, "-request"))
		if isRequest && !listed[f] {
			t.Errorf("Maestro fixture %s is not in maestroRequestFixtures", f)
		}
	}
	t.Parallel()
	var mu sync.Mutex
	ok := 0
	for _, f := range maestroRequestFixtures {
		t.Run(f.file, func(t *testing.T) {
			t.Parallel()
			e := newTestServer(t)
			e.withSampleEngine()
			r := f.send(e, repo, referenceFile(t, repo, fixturesDir+f.file))
			switch {
			case f.rejected && r.code != http.StatusBadRequest:
				t.Fatalf("answered %d, want 400 as Maestro: %s", r.code, r.raw)
			case !f.rejected && r.code/100 != 2:
				t.Fatalf("answered %d: %s", r.code, r.raw)
			}
			mu.Lock()
			ok++
			mu.Unlock()
		})
	}
	t.Cleanup(func() {
		t.Logf("Maestro request fixtures: %d of %d taken as Maestro takes them", ok, len(maestroRequestFixtures))
	})
}
