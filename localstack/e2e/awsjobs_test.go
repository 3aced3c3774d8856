package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	batchsdk "github.com/aws/aws-sdk-go-v2/service/batch"
	batchtypes "github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	gluesdk "github.com/aws/aws-sdk-go-v2/service/glue"
	gluetypes "github.com/aws/aws-sdk-go-v2/service/glue/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The AWS job steps' targets the deployment is given (CDK context): the
// engine task role may use exactly these, and their services' events reach
// the engine through the engine stack's queue.
const (
	jobWorkgroup    = "primary"
	jobResults      = "maestro-e2e-athena"
	jobGlueJob      = "maestro-e2e-load"
	jobStateMachine = "maestro-e2e-publish"
	jobBatchQueue   = "maestro-e2e-batch"
	jobBatchDef     = "maestro-e2e-report"
)

// awsJobContext is the CDK context of those targets.
var awsJobContext = []string{
	"-c", "maestro:stepAthenaWorkgroups=" + jobWorkgroup,
	"-c", "maestro:stepAthenaOutputLocations=s3://" + jobResults + "/results/",
	"-c", "maestro:stepGlueJobs=" + jobGlueJob,
	"-c", "maestro:stepStateMachines=" + jobStateMachine,
	"-c", "maestro:stepBatchJobQueues=" + jobBatchQueue,
	"-c", "maestro:stepBatchJobDefinitions=" + jobBatchDef,
}

// scenarioAWSJobs: a workflow of an Athena query, a Glue Python shell job,
// a Step Functions execution and a Batch job runs to SUCCEEDED on the
// deployed engine as its task role (the emulator evaluates each call
// against it), each step's params reading the outputs of the steps before
// it; the Batch job ends by its "Batch Job State Change" event
// (batchJobEnds); a second run is stopped while its execution waits, which
// stops the execution.
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
	queueARN := createBatchQueue(t, d)
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
				"input": str(fmt.Sprintf(`{"wait": %d, "rows": ${rows@query}}`, wait))}, "report"),
			// Polled once an hour: only its job's state-change event ends
			// it within the test.
			step("report", "Batch", "batch", map[string]any{"job_queue": str(jobBatchQueue), "job_definition": str(jobBatchDef),
				"poll_interval": str("1h"),
				"container_overrides": map[string]any{"type": "MAP", "value": map[string]any{
					"environment": map[string]any{"type": "STRING_MAP", "value": map[string]any{
						"ROWS": "${rows@query}", "ROW_COUNT": "${row_count@query}", "PUBLISHED": "${published@publish}"}}}}}, ""),
		}}}
	}

	ok := uniqueID("awsjobs")
	d.push(t, wf(ok, 1))
	d.start(t, ok)
	batchJobEnds(t, d, ok, queueARN)
	d.waitForRun(t, ok, "SUCCEEDED", 2*time.Minute)
	d.checkStepsSucceeded(t, ok, 4)
	code, body := d.CallAPI(t, "GET", "/api/v3/workflows/"+ok+"/instances/1/runs/1/steps", nil)
	for _, st := range readSteps(body) {
		if st.ID != "report" {
			continue
		}
		b, _ := st.Params["batch"].(map[string]any)
		co, _ := b["container_overrides"].(map[string]any)
		env, _ := co["environment"].(map[string]any)
		// The query's rows (JSON text), its row count, and the execution's
		// output, which passed the rows on.
		rows := `[{"rows":"42"}]`
		if env["ROWS"] != rows || env["ROW_COUNT"] != "1" || env["PUBLISHED"] != rows || st.Params["exit_code"] != float64(0) ||
			st.Params["status"] != "SUCCEEDED" {
			t.Errorf("the Batch step's params (%d): environment %v, exit_code %v, status %v", code, env, st.Params["exit_code"], st.Params["status"])
		}
	}

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

// createBatchQueue makes the Batch step's compute environment, job queue
// and job definition, and returns the queue's ARN.
func createBatchQueue(t *testing.T, d *Deployment) string {
	t.Helper()
	ctx := context.Background()
	bc := batchsdk.NewFromConfig(d.AWS)
	ce, err := bc.CreateComputeEnvironment(ctx, &batchsdk.CreateComputeEnvironmentInput{
		ComputeEnvironmentName: aws.String(jobBatchQueue + "-ce"), Type: batchtypes.CETypeManaged,
		ComputeResources: &batchtypes.ComputeResource{Type: batchtypes.CRTypeFargate, MaxvCpus: aws.Int32(4), Subnets: []string{"subnet-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := bc.CreateJobQueue(ctx, &batchsdk.CreateJobQueueInput{JobQueueName: aws.String(jobBatchQueue), Priority: aws.Int32(1),
		ComputeEnvironmentOrder: []batchtypes.ComputeEnvironmentOrder{{ComputeEnvironment: ce.ComputeEnvironmentArn, Order: aws.Int32(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bc.RegisterJobDefinition(ctx, &batchsdk.RegisterJobDefinitionInput{JobDefinitionName: aws.String(jobBatchDef),
		Type: batchtypes.JobDefinitionTypeContainer, ContainerProperties: &batchtypes.ContainerProperties{Image: aws.String("busybox"),
			Command: []string{"sh", "-c", "echo $ROW_COUNT rows: $ROWS, published $PUBLISHED"}}}); err != nil {
		t.Fatal(err)
	}
	return aws.ToString(q.JobQueueArn)
}

// batchJobEnds delivers the end of the run's Batch job as AWS would. The
// emulator's Batch is a control plane: a job is SUCCEEDED the moment it is
// submitted (exit code 0; nothing runs), and it emits no state-change
// event, while its EventBridge refuses PutEvents from an aws.* source (as
// AWS does). So, once the engine has submitted the job (its id in the
// step's runtime data, the job in the emulator's Batch under the attempt's
// name), the test writes the "Batch Job State Change" event AWS Batch
// would send, checks that the deployed rule matches it (TestEventPattern
// with the rule's own pattern), and puts it in the rule's target queue as
// EventBridge would. The step polls once an hour, so the engine's event
// consumer is what ends it.
func batchJobEnds(t *testing.T, d *Deployment, workflowID, queueARN string) {
	t.Helper()
	ctx := context.Background()
	var jobID string
	waitFor(t, "the Batch step's job is submitted", 3*time.Minute, func() (bool, string) {
		_, body := d.CallAPI(t, "GET", "/api/v3/workflows/"+workflowID+"/instances/1/runs/1/steps", nil)
		items, _ := body["items"].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			rs, _ := m["runtime_state"].(map[string]any)
			data, _ := rs["data"].(map[string]any)
			if m["step_id"] == "report" && rs["status"] == "RUNNING" {
				jobID, _ = data["job_id"].(string)
				return jobID != "", fmt.Sprint(data)
			}
		}
		return false, fmt.Sprintf("%d steps", len(items))
	})
	jobs, err := batchsdk.NewFromConfig(d.AWS).DescribeJobs(ctx, &batchsdk.DescribeJobsInput{Jobs: []string{jobID}})
	if err != nil || len(jobs.Jobs) != 1 || !strings.HasPrefix(aws.ToString(jobs.Jobs[0].JobName), "maestro-report-") {
		t.Fatalf("the emulator's Batch does not know job %s as the step's: %+v %v", jobID, jobs, err)
	}
	job := jobs.Jobs[0]
	detail, err := json.Marshal(map[string]any{"jobArn": aws.ToString(job.JobArn), "jobName": aws.ToString(job.JobName), "jobId": jobID,
		"jobQueue": queueARN, "status": "SUCCEEDED", "statusReason": aws.ToString(job.StatusReason), "attempts": []any{},
		"createdAt": aws.ToInt64(job.CreatedAt), "stoppedAt": aws.ToInt64(job.StoppedAt), "jobDefinition": aws.ToString(job.JobDefinition),
		"parameters": map[string]any{}, "container": map[string]any{"exitCode": 0}, "tags": job.Tags})
	if err != nil {
		t.Fatal(err)
	}
	event, err := json.Marshal(map[string]any{"version": "0", "id": fmt.Sprint(time.Now().UnixNano()), "detail-type": "Batch Job State Change",
		"source": "aws.batch", "account": "000000000000", "time": time.Now().UTC().Format(time.RFC3339), "region": d.AWS.Region,
		"resources": []string{aws.ToString(job.JobArn)}, "detail": json.RawMessage(detail)})
	if err != nil {
		t.Fatal(err)
	}
	eb := eventbridge.NewFromConfig(d.AWS)
	var rule ebtypes.Rule
	in := &eventbridge.ListRulesInput{}
	for rule.Name == nil {
		page, err := eb.ListRules(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Rules {
			if strings.Contains(aws.ToString(r.EventPattern), "Batch Job State Change") {
				rule = r
			}
		}
		if in.NextToken = page.NextToken; in.NextToken == nil {
			break
		}
	}
	if rule.Name == nil {
		t.Fatal("the engine stack deployed no rule for Batch's state-change events")
	}
	match, err := eb.TestEventPattern(ctx, &eventbridge.TestEventPatternInput{EventPattern: rule.EventPattern, Event: aws.String(string(event))})
	if err != nil || !match.Result {
		t.Fatalf("the deployed rule %s (%s) does not match the job's event %s: %v", aws.ToString(rule.Name), aws.ToString(rule.EventPattern), event, err)
	}
	targets, err := eb.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: rule.Name})
	if err != nil || len(targets.Targets) != 1 {
		t.Fatalf("targets of rule %s: %+v %v", aws.ToString(rule.Name), targets, err)
	}
	target := aws.ToString(targets.Targets[0].Arn)
	sq := sqs.NewFromConfig(d.AWS)
	url, err := sq.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(target[strings.LastIndex(target, ":")+1:])})
	if err != nil {
		t.Fatalf("the rule's target queue %s: %v", target, err)
	}
	if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url.QueueUrl, MessageBody: aws.String(string(event))}); err != nil {
		t.Fatal(err)
	}
}
