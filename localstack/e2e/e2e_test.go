// Package e2e_test deploys the whole CDK app into a private ministack with
// `-c maestro:target=emulator` and drives it through real AWS SDK clients,
// one scenario per function. `make e2e` builds the Lambda packages for this
// machine and runs it; `go test` alone skips it unless MAESTRO_E2E=1.
//
// To add a function's scenario: write `func scenarioX(t *testing.T, d
// *Deployment)` below and add a line to scenarios.
package e2e_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// scenarios run in order against one deployment.
var scenarios = []struct {
	name string
	run  func(t *testing.T, d *Deployment)
}{
	{"api: SigV4-signed API Gateway call pushes and starts a workflow that the engine runs", scenarioAPI},
}

func TestEndToEnd(t *testing.T) {
	if os.Getenv("MAESTRO_E2E") != "1" {
		t.Skip("set MAESTRO_E2E=1 (make e2e) to deploy the CDK app into the emulator")
	}
	start := time.Now()
	d := deploy(t)
	t.Logf("deployed in %s", time.Since(start).Round(time.Second))
	for _, s := range scenarios {
		if !t.Run(s.name, func(t *testing.T) { s.run(t, d) }) {
			return
		}
	}
}

// scenarioAPI: the REST API refuses an unsigned call, and a signed one
// pushes a workflow (recording the IAM caller) and starts it; the local
// engine runs it to SUCCEEDED, read back through the API.
func scenarioAPI(t *testing.T, d *Deployment) {
	if code, body := d.callAPI(t, "GET", "/api/v3/health", nil, false); code != 403 {
		t.Errorf("unsigned call: %d %v, want 403", code, body)
	}
	if code, body := d.CallAPI(t, "GET", "/api/v3/health", nil); code != 200 {
		t.Fatalf("signed health: %d %v", code, body)
	}

	id := fmt.Sprintf("e2e_hello_%d", time.Now().UnixNano())
	code, created := d.CallAPI(t, "POST", "/api/v3/workflows", map[string]any{"workflow": map[string]any{
		"id":     id,
		"params": map[string]any{"day": map[string]any{"type": "LONG", "expression": "20240101 + 1"}},
		"steps": []any{
			map[string]any{"step": map[string]any{"id": "a", "type": "NoOp",
				"transition": map[string]any{"successors": map[string]any{"b": "day > 20240101"}}}},
			map[string]any{"step": map[string]any{"id": "b", "type": "NoOp"}},
		},
	}})
	if code != 201 {
		t.Fatalf("push: %d %v", code, created)
	}
	if by, _ := created["created_by"].(string); !strings.HasPrefix(by, "arn:") {
		t.Errorf("created_by = %v, want the IAM principal that signed the call", created["created_by"])
	}

	code, started := d.CallAPI(t, "POST", "/api/v3/workflows/"+id+"/versions/latest/actions/start",
		map[string]any{"request_id": "e2e-" + id})
	if code != 201 || started["status"] != "CREATED" {
		t.Fatalf("start: %d %v", code, started)
	}
	waitFor(t, "the run succeeds", 2*time.Minute, func() (bool, string) {
		code, inst := d.CallAPI(t, "GET", "/api/v3/workflows/"+id+"/instances/1", nil)
		return code == 200 && inst["status"] == "SUCCEEDED", fmt.Sprintf("%d %v", code, inst["status"])
	})
	code, steps := d.CallAPI(t, "GET", "/api/v3/workflows/"+id+"/instances/1/runs/1/steps", nil)
	list, _ := steps["steps"].([]any)
	if code != 200 || len(list) != 2 {
		t.Fatalf("steps: %d %v", code, steps)
	}
	for _, s := range list {
		s := s.(map[string]any)
		if s["status"] != "SUCCEEDED" {
			t.Errorf("step %v: %v", s["step_id"], s["status"])
		}
	}
}
