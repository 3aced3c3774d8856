package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// jobTemplatesDir holds Maestro's job template samples.
const jobTemplatesDir = "maestro-server/src/test/resources/jobtemplates/"

// stepParams reads the evaluated params of a run's step attempt.
func (e *testEnv) stepParams(t *testing.T, path, step string) map[string]any {
	t.Helper()
	r := e.send(http.MethodGet, path+"/runs/1/steps/"+step+"/attempts/1", "tester", "").expect(t, http.StatusOK)
	ps, ok := r.body["params"].(map[string]any)
	if !ok {
		t.Fatalf("step %s has no params: %s", step, r.raw)
	}
	return ps
}

// evaluated returns the evaluated value of a param as the API shows it.
func evaluated(t *testing.T, ps map[string]any, name string) any {
	t.Helper()
	p, ok := ps[name].(map[string]any)
	if !ok {
		raw, _ := json.Marshal(ps)
		t.Fatalf("no param %s in %s", name, raw)
	}
	return p["evaluated_result"]
}

// Maestro's sample-job-template-1.json (job type "shell", version v1, for
// Notebook steps) pushed as a job template makes sample-shell-wf.json, whose
// Notebook step names it by sub_type and gives only its script, push and
// run: the step inherits the template's notebook and kubernetes params
// (issue 30; the push was refused for lack of the notebook param).
func TestMaestroJobTemplateSample(t *testing.T) {
	repo := referenceRepo(t)
	t.Parallel()
	e := newTestServer(t)
	e.withSampleEngine()
	e.send(http.MethodPost, "/api/v3/job-templates", "tester",
		referenceFile(t, repo, jobTemplatesDir+"sample-job-template-1.json")).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows", "tester",
		referenceFile(t, repo, jobTemplatesDir+"sample-shell-wf.json")).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/sample-shell-wf/versions/latest/actions/start", "tester",
		`{"initiator": {"type": "manual"}}`).expect(t, http.StatusOK)
	path := "/api/v3/workflows/sample-shell-wf/instances/1"
	if got := e.waitTerminalWithin(path, 3*time.Minute); got.body["status"] != "SUCCEEDED" {
		steps := e.send(http.MethodGet, path+"/runs/1/steps", "", "")
		t.Fatalf("run ended %v, want SUCCEEDED: %s\n%s", got.body["status"], got.raw, steps.raw)
	}
	ps := e.stepParams(t, path, "job.2")
	nb, _ := evaluated(t, ps, "notebook").(map[string]any)
	if !strings.HasPrefix(nb["init_command"].(string), "python3 -m pip") || !strings.HasSuffix(nb["input_path"].(string), "/demo01.ipynb") {
		t.Fatalf("notebook param %v: not the template's", nb)
	}
	if k, _ := evaluated(t, ps, "kubernetes").(map[string]any); k["image"] != "python:3" {
		t.Fatalf("kubernetes param %v: not the template's", k)
	}
	if s, _ := evaluated(t, ps, "script").(string); !strings.Contains(s, "MAESTRO_OUTPUT_START") {
		t.Fatalf("script %q: the step's own script must win over the template's", s)
	}
	if foo := evaluated(t, ps, "foo"); foo != "bar" {
		t.Fatalf("foo = %v, want the notebook's output bar", foo)
	}
}

// A step's own MAP param merges into its template's member by member (the
// step's members win), its other params replace the template's, the
// template is read at the workflow's job_template_version, and a template
// for another step type is refused at push.
func TestJobTemplateMergedUnderStepParams(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withSampleEngine()
	tmpl := func(version, value string) string {
		return `{"owner":"alice","status":"ACTIVE","support":"data-eng","definition":{"job_type":"etl","step_type":"NoOp",
		  "version":"` + version + `","params":{
		    "conf":{"type":"MAP","value":{"a":{"type":"STRING","value":"` + value + `"},"b":{"type":"STRING","value":"template"}}},
		    "x":{"type":"STRING","value":"template x"},
		    "y":{"type":"LONG","value":7}}}}`
	}
	e.send(http.MethodPost, "/api/v3/job-templates", "alice", tmpl("default", "default a")).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/job-templates", "alice", tmpl("v2", "v2 a")).expect(t, http.StatusOK)
	wf := `{"workflow":{"id":"tmpl-wf","params":{"job_template_version":{"type":"STRING","value":"v2"}},"steps":[
	  {"step":{"id":"s","type":"NoOp","sub_type":"etl","params":{
	    "conf":{"type":"MAP","value":{"b":{"type":"STRING","value":"step"}}},
	    "x":{"type":"STRING","value":"step x"}}}}]}}`
	e.send(http.MethodPost, "/api/v3/workflows", "alice", wf).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/tmpl-wf/versions/latest/actions/start", "alice",
		`{"initiator": {"type": "manual"}}`).expect(t, http.StatusOK)
	path := "/api/v3/workflows/tmpl-wf/instances/1"
	if got := e.waitTerminalWithin(path, time.Minute); got.body["status"] != "SUCCEEDED" {
		t.Fatalf("run ended %v: %s", got.body["status"], got.raw)
	}
	ps := e.stepParams(t, path, "s")
	conf, _ := evaluated(t, ps, "conf").(map[string]any)
	if conf["a"] != "v2 a" || conf["b"] != "step" {
		t.Fatalf("conf = %v, want a from template v2 and b from the step", conf)
	}
	if x := evaluated(t, ps, "x"); x != "step x" {
		t.Fatalf("x = %v, want the step's", x)
	}
	if y := evaluated(t, ps, "y"); y != float64(7) {
		t.Fatalf("y = %v, want the template's 7", y)
	}
	// The same job type on an Http step: the template is for NoOp steps.
	bad := `{"workflow":{"id":"tmpl-bad","steps":[{"step":{"id":"h","type":"Http","sub_type":"etl",
	  "params":{"http":{"type":"MAP","value":{"url":{"type":"STRING","value":"http://x"}}}}}}]}}`
	r := e.send(http.MethodPost, "/api/v3/workflows", "alice", bad).expect(t, http.StatusBadRequest)
	if !strings.Contains(string(r.raw), "sub_type") || !strings.Contains(string(r.raw), "is for NoOp steps") {
		t.Fatalf("refusal %s does not name the template's step type", r.raw)
	}
}
