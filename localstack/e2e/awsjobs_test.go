package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	gluesdk "github.com/aws/aws-sdk-go-v2/service/glue"
	gluetypes "github.com/aws/aws-sdk-go-v2/service/glue/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
)

// The AWS job steps' targets the deployment is given (CDK context): the
// engine task role may use exactly these, and their services' events reach
// the engine through the engine stack's queue.
const (
	jobWorkgroup    = "primary"
	jobResults      = "maestro-e2e-athena"
	jobGlueJob      = "maestro-e2e-load"
	jobStateMachine = "maestro-e2e-publish"
)

// awsJobContext is the CDK context of those targets.
var awsJobContext = []string{
	"-c", "maestro:stepAthenaWorkgroups=" + jobWorkgroup,
	"-c", "maestro:stepAthenaOutputLocations=s3://" + jobResults + "/results/",
	"-c", "maestro:stepGlueJobs=" + jobGlueJob,
	"-c", "maestro:stepStateMachines=" + jobStateMachine,
}

// scenarioAWSJobs: a workflow of an Athena query, a Glue Python shell job
// and a Step Functions execution runs to SUCCEEDED on the deployed engine
// as its task role (the emulator evaluates each call against it); a second
// run is stopped while its execution waits, which stops the execution.
func scenarioAWSJobs(t *testing.T, d *Deployment) {
	ctx := context.Background()
	if _, err := s3.NewFromConfig(d.AWS, func(o *s3.Options) { o.UsePathStyle = true }).CreateBucket(ctx,
		&s3.CreateBucketInput{Bucket: aws.String(jobResults)}); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "load.py")
	if err := os.WriteFile(script, []byte("print('loaded')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gc := gluesdk.NewFromConfig(d.AWS)
	if _, err := gc.CreateJob(ctx, &gluesdk.CreateJobInput{Name: aws.String(jobGlueJob), Role: aws.String("arn:aws:iam::000000000000:role/glue"),
		Command: &gluetypes.JobCommand{Name: aws.String("pythonshell"), ScriptLocation: aws.String(script)}}); err != nil {
		t.Fatal(err)
	}
	// The emulator checks that a state machine's role exists.
	role, err := iam.NewFromConfig(d.AWS).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(jobStateMachine + "-role"),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow",` +
			`"Principal":{"Service":"states.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	sc := sfn.NewFromConfig(d.AWS)
	sm, err := sc.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{Name: aws.String(jobStateMachine),
		RoleArn: role.Role.Arn,
		Definition: aws.String(`{"StartAt":"Wait","States":{"Wait":{"Type":"Wait","SecondsPath":"$.wait","Next":"Done"},` +
			`"Done":{"Type":"Pass","Parameters":{"published.$":"$.rows"},"End":true}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	machine := aws.ToString(sm.StateMachineArn)
	wf := func(id string, wait int) map[string]any {
		str := func(v string) map[string]any { return map[string]any{"type": "STRING", "value": v} }
		step := func(id, typ, param string, value map[string]any, next string) map[string]any {
			s := map[string]any{"id": id, "type": typ, "params": map[string]any{param: map[string]any{"type": "MAP", "value": value}}}
			if next != "" {
				s["transition"] = map[string]any{"successors": map[string]any{next: "true"}}
			}
			return map[string]any{"step": s}
		}
		return map[string]any{"workflow": map[string]any{"id": id, "steps": []any{
			step("query", "Athena", "athena", map[string]any{"query": str("SELECT 6 * 7 AS rows"),
				"output_location": str("s3://" + jobResults + "/results/")}, "load"),
			step("load", "Glue", "glue", map[string]any{"job_name": str(jobGlueJob)}, "publish"),
			step("publish", "StepFunctions", "step_functions", map[string]any{"state_machine_arn": str(machine),
				"input": str(fmt.Sprintf(`{"wait": %d, "rows": ${rows@query}}`, wait))}, ""),
		}}}
	}

	ok := uniqueID("awsjobs")
	d.push(t, wf(ok, 1))
	d.start(t, ok)
	d.waitForRun(t, ok, "SUCCEEDED", 3*time.Minute)
	d.checkStepsSucceeded(t, ok, 3)

	stopped := uniqueID("awsjobs_stop")
	d.push(t, wf(stopped, 600))
	d.start(t, stopped)
	var execARN string
	waitFor(t, "the second run's execution runs", 2*time.Minute, func() (bool, string) {
		out, err := sc.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(machine), StatusFilter: sfntypes.ExecutionStatusRunning})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range out.Executions {
			if strings.HasPrefix(aws.ToString(e.Name), "maestro-") {
				execARN = aws.ToString(e.ExecutionArn)
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d running", len(out.Executions))
	})
	if code, body := d.CallAPI(t, "PUT", "/api/v3/workflows/"+stopped+"/instances/1/actions/stop", nil); code != 200 {
		t.Fatalf("stop: %d %v", code, body)
	}
	d.waitForRun(t, stopped, "STOPPED", 2*time.Minute)
	waitFor(t, "the execution is aborted", time.Minute, func() (bool, string) {
		out, err := sc.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(execARN)})
		if err != nil {
			return false, err.Error()
		}
		return out.Status == sfntypes.ExecutionStatusAborted, string(out.Status)
	})
}
