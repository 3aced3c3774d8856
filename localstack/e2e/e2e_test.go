// Package e2e_test deploys the whole CDK app into a private ministack with
// `-c maestro:target=emulator` and drives it through real AWS SDK clients,
// one scenario per function. `make e2e` builds the Lambda packages for this
// machine and runs it; `go test` alone skips it unless MAESTRO_E2E=1.
//
// To add a function's scenario: write `func scenarioX(t *testing.T, d
// *Deployment)` and add a line to scenarios. The scenarios run at the same
// time against one deployment (the time-trigger one waits for the
// emulator's Scheduler, which fires after a minute), so each works on
// workflows of its own (uniqueID) and reads shared queues by workflow id.
package e2e_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// scenarios run in parallel against one deployment.
var scenarios = []struct {
	name string
	run  func(t *testing.T, d *Deployment)
}{
	{"api: SigV4-signed API Gateway call pushes and starts a workflow that the engine runs", scenarioAPI},
	{"cli: maestro push, start, watch and list through the signed API Gateway", scenarioCLI},
	{"ui: maestro ui serves the deployed UI and API reference, signing what it forwards", scenarioUI},
	{"timetrigger: the Scheduler fires a cron workflow through the time-trigger Lambda", scenarioTimeTrigger},
	{"signals: an S3 object starts a signal-triggered run through SQS and the signals Lambda; a poison message goes to the DLQ", scenarioSignals},
	{"fresh: deployed into an empty database (migrated by the deploy), a cron trigger fires on the first scheduled minute; all sessions are the app role's", scenarioFreshDatabase},
	{"publisher: the engine's events reach the example subscriber through SQS, the publisher Lambda and SNS", scenarioPublisher},
	{"backfill: a backfill started through the signed API runs one run per date and its downstream workflow to SUCCEEDED", scenarioBackfill},
	{"awsjobs: Athena, Glue, Step Functions and Batch steps run as the engine's task role, a Batch job's state-change event ends its step; a stop stops the execution", scenarioAWSJobs},
}

func TestEndToEnd(t *testing.T) {
	if os.Getenv("MAESTRO_E2E") != "1" {
		t.Skip("set MAESTRO_E2E=1 (make e2e) to deploy the CDK app into the emulator")
	}
	start := time.Now()
	d := deploy(t)
	t.Logf("deployed in %s", time.Since(start).Round(time.Second))
	t.Run("scenarios", func(t *testing.T) {
		for _, s := range scenarios {
			t.Run(s.name, func(t *testing.T) {
				t.Parallel()
				began := time.Now()
				s.run(t, d)
				t.Logf("took %s", time.Since(began).Round(time.Second))
			})
		}
	})
	// After every scenario, so that their calls are all recorded.
	t.Run("iam: every AWS call the Lambdas and the engine made is granted by their deployed roles, and every grant is used or reasoned", func(t *testing.T) {
		checkIAM(t, d)
	})
	t.Logf("end to end in %s", time.Since(start).Round(time.Second))
}

// uniqueID is a workflow id no other scenario or run uses.
func uniqueID(prefix string) string {
	return fmt.Sprintf("e2e_%s_%d", prefix, time.Now().UnixNano())
}

// twoSteps is a workflow definition of two NoOp steps, a then b, with a
// param and a SEL condition on the edge, plus the given workflow fields.
func twoSteps(id string, extra map[string]any) map[string]any {
	wf := map[string]any{
		"id":     id,
		"params": map[string]any{"day": map[string]any{"type": "LONG", "expression": "20240101 + 1"}},
		"steps": []any{
			map[string]any{"step": map[string]any{"id": "a", "type": "NoOp",
				"transition": map[string]any{"successors": map[string]any{"b": "day > 20240101"}}}},
			map[string]any{"step": map[string]any{"id": "b", "type": "NoOp"}},
		},
	}
	for k, v := range extra {
		wf[k] = v
	}
	return map[string]any{"workflow": wf}
}

// push creates a workflow through the signed API.
func (d *Deployment) push(t *testing.T, def map[string]any) workflowView {
	t.Helper()
	code, created := d.CallAPI(t, "POST", "/api/v3/workflows", def)
	if code != 200 {
		t.Fatalf("push: %d %v", code, created)
	}
	return readWorkflow(created)
}

// start starts the workflow's latest version through the signed API.
func (d *Deployment) start(t *testing.T, id string) {
	t.Helper()
	code, started := d.CallAPI(t, "POST", "/api/v3/workflows/"+id+"/versions/latest/actions/start",
		map[string]any{"request_id": "e2e-" + id})
	if st := readInstance(started); code != 200 || st.Status != "CREATED" {
		t.Fatalf("start: %d %v", code, started)
	}
}

// waitForRun waits until instance 1 of workflow id reaches status, read
// through the API, and returns it.
func (d *Deployment) waitForRun(t *testing.T, id, status string, timeout time.Duration) instanceView {
	t.Helper()
	return d.waitForInstance(t, id, 1, status, timeout)
}

// waitForInstance waits until instance iid of workflow id reaches status,
// read through the API, and returns it.
func (d *Deployment) waitForInstance(t *testing.T, id string, iid int, status string, timeout time.Duration) instanceView {
	t.Helper()
	var last instanceView
	waitFor(t, fmt.Sprintf("instance %d of %s is %s", iid, id, status), timeout, func() (bool, string) {
		code, body := d.CallAPI(t, "GET", fmt.Sprintf("/api/v3/workflows/%s/instances/%d", id, iid), nil)
		last = readInstance(body)
		return code == 200 && last.Status == status, fmt.Sprintf("%d %+v", code, last)
	})
	return last
}

// checkStepsSucceeded reads the run's steps through the API.
func (d *Deployment) checkStepsSucceeded(t *testing.T, id string, want int) {
	t.Helper()
	code, body := d.CallAPI(t, "GET", "/api/v3/workflows/"+id+"/instances/1/runs/1/steps", nil)
	steps := readSteps(body)
	if code != 200 || len(steps) != want {
		t.Fatalf("steps: %d %v", code, body)
	}
	for _, s := range steps {
		if s.Status != "SUCCEEDED" {
			t.Errorf("step %s: %s", s.ID, s.Status)
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

	id := uniqueID("hello")
	if by := d.push(t, twoSteps(id, nil)).CreatedBy; !strings.HasPrefix(by, "arn:") {
		t.Errorf("created_by = %q, want the IAM principal that signed the call", by)
	}
	d.start(t, id)
	if run := d.waitForRun(t, id, "SUCCEEDED", 2*time.Minute); run.InitiatorType != "MANUAL" {
		t.Errorf("initiator %q, want MANUAL", run.InitiatorType)
	}
	d.checkStepsSucceeded(t, id, 2)
}
