package httpstep_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/httpstep"
)

func engineWith(t *testing.T) *flowtest.Env {
	t.Helper()
	env := flowtest.New(t)
	env.Engine(stepruntime.Registry{httpstep.Type: httpstep.New(httpstep.Config{})}, flow.Config{})
	return env
}

// A workflow calls a server; the next step reads the response's status
// and JSON body through its params.
func TestHttpStepOutputsFeedLaterSteps(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"count": 7, "name": "nightly"}`)
	})
	env := engineWith(t)
	env.Push(fmt.Sprintf(`{"workflow":{"id":"calls","params":{"n":{"type":"LONG","value":3}},"steps":[
		{"step":{"id":"call","type":"Http","transition":{"successors":{"after":"true"}},
		  "params":{"http":{"type":"MAP","value":{
		    "url":{"type":"STRING","value":"%s/runs/${n}"},
		    "method":{"type":"STRING","value":"POST"},
		    "body":{"type":"STRING","value":"{\"n\": ${n}}"}}}}}},
		{"step":{"id":"after","type":"NoOp","params":{
		  "code":{"type":"LONG","expression":"params.getFromStep('call', 'status_code')"},
		  "count":{"type":"LONG","expression":"params.getFromStep('call', 'response_json').get('count')"},
		  "said":{"type":"STRING","value":"${response_body@call}"}}}}]}}`, srv.URL))
	inst := env.Start("calls")
	if got := env.Wait(inst, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", got.Status)
	}
	keys, bodies := srv.seen()
	if bodies[0] != `POST /runs/3 {"n": 3}` {
		t.Errorf("request %q", bodies[0])
	}
	call := env.Attempts(inst, "call")[0]
	if keys[call.UUID] != 1 {
		t.Errorf("keys %v, want %s once", keys, call.UUID)
	}
	// Its stored params are those it was called with and, set on them by
	// its end's write, the response's outputs.
	var stored map[string]struct{ Value any }
	if err := json.Unmarshal(call.Params, &stored); err != nil {
		t.Fatal(err)
	}
	if _, ok := stored["http"]; !ok || stored["status_code"].Value != float64(200) || !strings.Contains(fmt.Sprint(stored["response_body"].Value), "nightly") {
		t.Errorf("the call's stored params %s, want its http param and the response's outputs", call.Params)
	}
	after := env.Attempts(inst, "after")[0]
	var p map[string]struct{ Value any }
	if err := json.Unmarshal(after.Params, &p); err != nil {
		t.Fatal(err)
	}
	if p["code"].Value != float64(200) || p["count"].Value != float64(7) || !strings.Contains(p["said"].Value.(string), "nightly") {
		t.Errorf("downstream params %s", after.Params)
	}
}

// A 5xx fails the attempt as a platform error; the retry is a new attempt
// with a new idempotency key, and it succeeds.
func TestHttpStep5xxIsRetried(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	env := engineWith(t)
	env.Push(fmt.Sprintf(`{"workflow":{"id":"flaky","steps":[
		{"step":{"id":"call","type":"Http","retry_policy":{"backoff":{"type":"FIXED_BACKOFF","platform_retry_backoff_in_secs":1}},
		  "params":{"http":{"type":"MAP","value":{"url":{"type":"STRING","value":"%s"}}}}}}]}}`, srv.URL))
	inst := env.Start("flaky")
	if got := env.Wait(inst, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", got.Status)
	}
	atts := env.Attempts(inst, "call")
	if len(atts) != 2 || atts[0].Status != instance.StepPlatformFailed || atts[1].Status != instance.StepSucceeded {
		t.Fatalf("attempts %v", statuses(atts))
	}
	if !strings.Contains(string(atts[0].Timeline), "503") {
		t.Errorf("first attempt's timeline lacks the status: %s", atts[0].Timeline)
	}
	if keys, _ := srv.seen(); len(keys) != 2 || keys[atts[0].UUID] != 1 || keys[atts[1].UUID] != 1 {
		t.Errorf("keys %v", keys)
	}
}

// A 4xx is the user's error, retried within the error retry limit.
func TestHttpStep4xxIsUserError(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no such thing", http.StatusNotFound) })
	env := engineWith(t)
	env.Push(fmt.Sprintf(`{"workflow":{"id":"missing","steps":[
		{"step":{"id":"call","type":"Http","retry_policy":{"error_retry_limit":0},
		  "params":{"http":{"type":"MAP","value":{"url":{"type":"STRING","value":"%s"}}}}}}]}}`, srv.URL))
	inst := env.Start("missing")
	if got := env.Wait(inst, 30*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("run ended %s", got.Status)
	}
	atts := env.Attempts(inst, "call")
	if len(atts) != 1 || atts[0].Status != instance.StepFatallyFailed || !strings.Contains(string(atts[0].Timeline), "USER_ERROR") {
		t.Fatalf("attempts %v: %s", statuses(atts), atts[0].Timeline)
	}
}

// The step's timeout ends a call that hangs, at once, as TIMED_OUT.
func TestHttpStepTimeout(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	env := engineWith(t)
	env.Push(fmt.Sprintf(`{"workflow":{"id":"slow","steps":[
		{"step":{"id":"call","type":"Http","timeout":"2s",
		  "params":{"http":{"type":"MAP","value":{"url":{"type":"STRING","value":"%s"},"timeout":{"type":"STRING","value":"10m"}}}}}}]}}`, srv.URL))
	inst := env.Start("slow")
	start := time.Now()
	got := env.Wait(inst, 30*time.Second)
	if got.Status != instance.WorkflowFailed {
		t.Fatalf("run ended %s", got.Status)
	}
	if atts := env.Attempts(inst, "call"); len(atts) != 1 || atts[0].Status != instance.StepTimedOut {
		t.Fatalf("attempts %v", statuses(atts))
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the timeout took %s", d)
	}
}

// Stopping the run while the request is in flight cancels the request and
// stops the step without waiting for the answer.
func TestHttpStepStoppedMidCall(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 1)
	cancelled := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(time.Minute):
		}
	})
	env := engineWith(t)
	env.Push(fmt.Sprintf(`{"workflow":{"id":"stopme","steps":[
		{"step":{"id":"call","type":"Http","params":{"http":{"type":"MAP","value":{"url":{"type":"STRING","value":"%s"},"timeout":{"type":"STRING","value":"10m"}}}}}}]}}`, srv.URL))
	inst := env.Start("stopme")
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the request never arrived")
	}
	if _, err := env.Runs.Act(context.Background(), "stopme", inst.InstanceID, inst.RunID, run.ActionStop); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the request was not cancelled")
	}
	if got := env.Wait(inst, 20*time.Second); got.Status != instance.WorkflowStopped {
		t.Fatalf("run ended %s", got.Status)
	}
	if atts := env.Attempts(inst, "call"); len(atts) != 1 || atts[0].Status != instance.StepStopped {
		t.Fatalf("attempts %v", statuses(atts))
	}
}

func statuses(atts []*execution.StepAttempt) []string {
	out := make([]string, len(atts))
	for i, a := range atts {
		out[i] = string(a.Status)
	}
	return out
}

// Maestro's sample Http workflow, in its YAML DSL shape ('http<pmap>',
// state_expr), runs unchanged: the body is interpolated from a workflow
// param, and state_expr makes a 404 a success.
func TestMaestroSampleHttpWorkflow(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.Header.Get("Content-Type") == "application/yaml" && r.Header.Get("user") == "tester" {
			_, _ = io.WriteString(w, `{"valid": true}`)
			return
		}
		http.NotFound(w, r)
	})
	env := engineWith(t)
	env.PushYAML(strings.ReplaceAll(`Workflow:
  id: "sample-http-wf"
  wf_body: |
    Workflow:
      id: "sample-wf-2"
  dag: sequential
  jobs:
    - job:
        id: "job.1"
        type: "http"
        'http<pmap>':
          url: "URL/api/v3/workflows/actions/validate/yaml"
          method: "PUT"
          headers:
            Content-Type: application/yaml
            Accept: application/json
            user: tester
          body: ${wf_body}
    - job:
        id: "job.5"
        type: "http"
        'http<pmap>':
          url: "URL/api/v3/workflows/sample-wf-2/versions/latest"
          method: "GET"
        state_expr: |
          if (status_code == 404) return "DONE";
          else return "FATAL_ERROR";
`, "URL", srv.URL))
	inst := env.Start("sample-http-wf")
	if got := env.Wait(inst, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", got.Status)
	}
	if _, bodies := srv.seen(); len(bodies) != 2 || !strings.Contains(bodies[0], "id: \"sample-wf-2\"") {
		t.Errorf("requests %q", bodies)
	}
	if out := string(env.Attempts(inst, "job.5")[0].Outputs); !strings.Contains(out, `"status_code": 404`) {
		t.Errorf("job.5 outputs %s", out)
	}
}
