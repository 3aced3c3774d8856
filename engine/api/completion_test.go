package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
	"github.com/maestro-aws/maestro/engine/stepruntime/lambdastep"
)

// acceptingLambda takes every asynchronous invocation and keeps the
// payloads it was given.
type acceptingLambda struct {
	mu       sync.Mutex
	payloads [][]byte
}

func (l *acceptingLambda) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.payloads = append(l.payloads, in.Payload)
	return &lambda.InvokeOutput{StatusCode: 202}, nil
}

// identity returns the maestro member of the first payload.
func (l *acceptingLambda) identity(t *testing.T) map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.payloads) == 0 {
		t.Fatal("the function was not invoked")
	}
	var p struct {
		Maestro map[string]any `json:"maestro"`
	}
	if err := json.Unmarshal(l.payloads[0], &p); err != nil {
		t.Fatal(err)
	}
	return p.Maestro
}

// An asynchronous Lambda step ends when its job calls back: outputs with
// PUT /output-data, then PUT /step-completion, which wakes the step at once
// (its own poll is an hour).
func TestStepCompletion(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	rts := stepruntime.Builtins()
	fake := &acceptingLambda{}
	lr, err := lambdastep.New(lambdastep.Config{Client: fake, Completions: completion.NewStore(e.pool)})
	if err != nil {
		t.Fatal(err)
	}
	rts[lambdastep.Type] = lr
	eng, err := flow.New(e.pool, flow.Config{Logger: discardLogger(), Lease: 2 * time.Second, Runtimes: rts})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)

	e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"workflow":{"id":"cb","steps":[
	    {"step":{"id":"fn","type":"Lambda","transition":{"successors":{"use":"true"}},
	      "params":{"lambda":{"type":"MAP","value":{"function_name":{"type":"STRING","value":"etl"},
	        "mode":{"type":"STRING","value":"async"},"poll_interval":{"type":"STRING","value":"1h"}}}}}},
	    {"step":{"id":"use","type":"NoOp","params":{"plus":{"type":"LONG","expression":"fn__rows + 1"}}}},
	    {"step":{"id":"nap","type":"Sleep","sleep_seconds":30}}]}}`).expect(t, http.StatusOK)
	start := e.send(http.MethodPost, "/api/v3/workflows/cb/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
	iid := start.num(t, "workflow_instance_id")
	fnPath := fmt.Sprintf("/api/v3/workflows/cb/instances/%d/runs/1/steps/fn/attempts/latest", iid)
	running := e.waitAttempt(fnPath, "RUNNING")
	// RUNNING comes before the invocation and its record that the attempt
	// waits for a completion call: wait for that record.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(string(running.raw), `"`+completion.KeyAwaits+`":true`); {
		if time.Now().After(deadline) {
			t.Fatalf("the Lambda step never recorded that it awaits a completion: %s", running.raw)
		}
		time.Sleep(20 * time.Millisecond)
		running = e.waitAttempt(fnPath, "RUNNING")
	}
	uuid := paramValue(t, running, "step_instance_uuid").(string)
	napping := e.waitAttempt(fmt.Sprintf("/api/v3/workflows/cb/instances/%d/runs/1/steps/nap/attempts/latest", iid), "RUNNING")
	napUUID := paramValue(t, napping, "step_instance_uuid").(string)

	// The job's step token comes with the payload, and only there: no
	// read of the step shows it.
	token, _ := fake.identity(t)["step_token"].(string)
	if token == "" || token != e.stepToken(uuid) {
		t.Fatalf("payload identity %v lacks the attempt's step token", fake.identity(t))
	}
	if strings.Contains(string(running.raw), token) {
		t.Fatalf("the attempt's read view shows its step token: %s", running.raw)
	}
	withToken := func(step, uuid, token, state string, attempt int) string {
		return fmt.Sprintf(`{"workflow_id":"cb","workflow_instance_id":%d,"workflow_run_id":1,"step_id":%q,"step_attempt_id":%d,
		    "step_instance_uuid":%q,"step_token":%q,"state":%q,"message":"loaded"}`, iid, step, attempt, uuid, token, state)
	}
	body := func(step, uuid, state string, attempt int) string {
		return withToken(step, uuid, e.stepToken(uuid), state, attempt)
	}
	// Knowing the uuid is not enough (issue 27 N2).
	e.send(http.MethodPut, "/api/v3/step-completion", "mallory", withToken("fn", uuid, "", "FATAL_ERROR", 1)).expect(t, http.StatusForbidden)
	e.send(http.MethodPut, "/api/v3/step-completion", "mallory", withToken("fn", uuid, e.stepToken(napUUID), "FATAL_ERROR", 1)).expect(t, http.StatusForbidden)
	bad := e.send(http.MethodPut, "/api/v3/step-completion", "", body("fn", uuid, "FINISHED", 1)).expect(t, http.StatusBadRequest)
	if !strings.Contains(bad.errorsText(), "state: want one of DONE") {
		t.Errorf("errors: %s", bad.errorsText())
	}
	e.send(http.MethodPut, "/api/v3/step-completion", "", body("fn", "not-a-uuid", "DONE", 1)).expect(t, http.StatusBadRequest)
	e.send(http.MethodPut, "/api/v3/step-completion", "", body("fn", "00000000-0000-0000-0000-000000000000", "DONE", 1)).expect(t, http.StatusForbidden)
	e.send(http.MethodPut, "/api/v3/step-completion", "", body("fn", uuid, "DONE", 9)).expect(t, http.StatusNotFound)
	// A step that waits for no completion call refuses one.
	e.send(http.MethodPut, "/api/v3/step-completion", "", body("nap", napUUID, "DONE", 1)).expect(t, http.StatusConflict)

	e.send(http.MethodPut, "/api/v3/output-data", "", fmt.Sprintf(`{"workflow_id":"cb","workflow_instance_id":%d,"workflow_run_id":1,
	    "step_id":"fn","step_attempt_id":1,"step_instance_uuid":%q,"step_token":%q,"params":{"rows":{"type":"LONG","value":12}}}`, iid, uuid, token)).expect(t, http.StatusOK)
	ok := e.send(http.MethodPut, "/api/v3/step-completion", "", body("fn", uuid, "done", 1)).expect(t, http.StatusOK)
	if ok.body["state"] != "DONE" {
		t.Errorf("completion %s", ok.raw)
	}
	// The first call wins.
	again := e.send(http.MethodPut, "/api/v3/step-completion", "", body("fn", uuid, "FATAL_ERROR", 1))
	if again.code != http.StatusOK && again.code != http.StatusConflict || again.code == http.StatusOK && again.body["state"] != "DONE" {
		t.Errorf("repeat: %d %s", again.code, again.raw)
	}

	use := e.waitAttempt(fmt.Sprintf("/api/v3/workflows/cb/instances/%d/runs/1/steps/use/attempts/latest", iid), "SUCCEEDED")
	if v := paramValue(t, use, "plus"); v != float64(13) {
		t.Errorf("use.plus = %v, want 13 (the job's output + 1)", v)
	}
	fn := e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/cb/instances/%d/runs/1/steps/fn/attempts/latest", iid), "", "").expect(t, http.StatusOK)
	if stepStatus(fn) != "SUCCEEDED" || !strings.Contains(string(fn.raw), "reported DONE: loaded") {
		t.Errorf("fn attempt %s", fn.raw)
	}
}
