package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	athenasdk "github.com/aws/aws-sdk-go-v2/service/athena"
	gluesdk "github.com/aws/aws-sdk-go-v2/service/glue"
	gluetypes "github.com/aws/aws-sdk-go-v2/service/glue/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime/athena"
	"github.com/maestro-aws/maestro/engine/stepruntime/glue"
	"github.com/maestro-aws/maestro/engine/stepruntime/stepfunctions"
	"github.com/maestro-aws/maestro/localstack"
)

// Kill -9 the engine while each run's Athena query, Glue job run and Step
// Functions execution are in flight in the emulator (the Glue Python shell
// job sleeps, the state machine waits), then start it again: the restarted
// engine finds every job its predecessor started (the query by its marker,
// the job run by its --maestro_step_instance_uuid argument, the execution
// by its name) instead of starting another, and every run SUCCEEDS with a
// single attempt per step.
func TestKilledEngineStartsEachAWSJobOnce(t *testing.T) {
	t.Parallel()
	const runs = 12
	ctx := context.Background()
	dsn := dbtest.URL(t)
	cfg := localstack.Config(t)
	ac, gc, sc := athenasdk.NewFromConfig(cfg), gluesdk.NewFromConfig(cfg), sfn.NewFromConfig(cfg)
	suffix := fmt.Sprint(time.Now().UnixNano())

	bucket := "kill-results-" + suffix
	if _, err := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }).CreateBucket(ctx,
		&s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	workgroup := "kill-" + suffix
	if _, err := ac.CreateWorkGroup(ctx, &athenasdk.CreateWorkGroupInput{Name: aws.String(workgroup)}); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "sleep.py")
	if err := os.WriteFile(script, []byte("import time\ntime.sleep(6)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	job := "kill-" + suffix
	if _, err := gc.CreateJob(ctx, &gluesdk.CreateJobInput{Name: aws.String(job), Role: aws.String("arn:aws:iam::000000000000:role/glue"),
		Command: &gluetypes.JobCommand{Name: aws.String("pythonshell"), ScriptLocation: aws.String(script)}}); err != nil {
		t.Fatal(err)
	}
	sm, err := sc.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{Name: aws.String("kill-" + suffix),
		RoleArn:    aws.String("arn:aws:iam::000000000000:role/sfn"),
		Definition: aws.String(`{"StartAt":"Wait","States":{"Wait":{"Type":"Wait","Seconds":6,"Next":"Done"},"Done":{"Type":"Pass","Result":{"ok":true},"End":true}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	machine := aws.ToString(sm.StateMachineArn)

	f := pushAndStart(t, dsn, runs, fmt.Sprintf(`{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"awsjobs","steps":[
	  {"step":{"id":"query","type":"Athena","params":{"athena":{"type":"MAP","value":{
	    "query":{"type":"STRING","value":"SELECT count(*) AS n FROM range(20000000) t(x) WHERE x %% 7 = ${workflow_instance_id} %% 7"},
	    "workgroup":{"type":"STRING","value":%q},"output_location":{"type":"STRING","value":"s3://%s/r/"}}}}}},
	  {"step":{"id":"load","type":"Glue","params":{"glue":{"type":"MAP","value":{"job_name":{"type":"STRING","value":%q}}}}}},
	  {"step":{"id":"flow","type":"StepFunctions","params":{"step_functions":{"type":"MAP","value":{
	    "state_machine_arn":{"type":"STRING","value":%q},"input":{"type":"STRING","value":"{\"run\": ${workflow_instance_id}}"}}}}}}]}}`,
		workgroup, bucket, job, machine))

	env := []string{"MAESTRO_AWS_ENDPOINT=" + localstack.Endpoint(t), "AWS_REGION=" + localstack.Region, "AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true"}
	p1 := engineProcess(t, dsn, "aj-1", "4", env...)
	glueRuns := func() []gluetypes.JobRun {
		t.Helper()
		var all []gluetypes.JobRun
		var next *string
		for {
			out, err := gc.GetJobRuns(ctx, &gluesdk.GetJobRunsInput{JobName: aws.String(job), NextToken: next})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, out.JobRuns...)
			if next = out.NextToken; next == nil {
				return all
			}
		}
	}
	executions := func() []string {
		t.Helper()
		out, err := sc.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(machine)})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range out.Executions {
			names = append(names, aws.ToString(e.Name))
		}
		return names
	}
	deadline := time.Now().Add(90 * time.Second)
	for len(glueRuns()) < runs || len(executions()) < runs {
		if time.Now().After(deadline) {
			t.Fatalf("before the kill: %d job runs, %d executions", len(glueRuns()), len(executions()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	running := 0
	for _, r := range glueRuns() {
		if r.JobRunState == gluetypes.JobRunStateRunning {
			running++
		}
	}
	t.Logf("killed with %d of %d Glue runs still running", running, runs)
	engineProcess(t, dsn, "aj-2", "4", env...)
	f.checkAllSucceeded(t, 3*time.Minute)

	rows, err := f.pool.Query(ctx, `SELECT step_id, uuid::text, status, attempt_id FROM step_instance WHERE workflow_id = 'awsjobs'`)
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct {
		Step, UUID, Status string
		Attempt            int64
	}
	atts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[attempt])
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 3*runs {
		t.Errorf("%d step attempts for %d runs of 3 steps", len(atts), runs)
	}
	uuids := map[string]string{} // uuid -> step
	for _, a := range atts {
		if a.Status != string(instance.StepSucceeded) || a.Attempt != 1 {
			t.Errorf("%s attempt %d %s: %s", a.Step, a.Attempt, a.UUID, a.Status)
		}
		uuids[a.UUID] = a.Step
	}

	perAttempt := map[string]int{}
	for _, r := range glueRuns() {
		perAttempt[r.Arguments[glue.ArgAttempt]]++
	}
	for _, name := range executions() {
		perAttempt[strings.TrimPrefix(name, stepfunctions.ExecutionName(""))]++
	}
	ids, err := ac.ListQueryExecutions(ctx, &athenasdk.ListQueryExecutionsInput{WorkGroup: aws.String(workgroup)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(ids.QueryExecutionIds); i += 50 {
		got, err := ac.BatchGetQueryExecution(ctx, &athenasdk.BatchGetQueryExecutionInput{QueryExecutionIds: ids.QueryExecutionIds[i:min(i+50, len(ids.QueryExecutionIds))]})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range got.QueryExecutions {
			query := aws.ToString(q.Query)
			perAttempt[query[strings.LastIndex(query, athena.Marker)+len(athena.Marker):]]++
		}
	}
	if len(perAttempt) != 3*runs {
		t.Errorf("%d jobs' attempts, want %d", len(perAttempt), 3*runs)
	}
	for key, n := range perAttempt {
		if n != 1 || uuids[key] == "" {
			t.Errorf("attempt %s (%s): %d jobs started", key, uuids[key], n)
		}
	}
}
