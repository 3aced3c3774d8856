package localstack_test

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
	athenasdk "github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	gluesdk "github.com/aws/aws-sdk-go-v2/service/glue"
	gluetypes "github.com/aws/aws-sdk-go-v2/service/glue/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/athena"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/stepruntime/glue"
	"github.com/maestro-aws/maestro/engine/stepruntime/registry"
	"github.com/maestro-aws/maestro/engine/stepruntime/stepfunctions"
	"github.com/maestro-aws/maestro/localstack"
)

// awsJobsFixture is what the AWS job step tests create in the emulator: a
// bucket for Athena's results, a Glue Python shell job whose script
// records its arguments in a file, and two state machines (a Lambda task;
// a long wait).
type awsJobsFixture struct {
	bucket, glueJob, glueSleepJob, lambdaMachine, waitMachine string
	glueOut                                                   string
	athena                                                    *athenasdk.Client
	glue                                                      *gluesdk.Client
	sfn                                                       *sfn.Client
}

// glueScript writes the --out file with the run's arguments: Glue passes
// them as argv (--name value), the emulator as the environment.
const glueScript = `import json, os, sys, time
args = {}
argv = sys.argv[1:]
for i in range(0, len(argv) - 1):
    if argv[i].startswith("--"):
        args[argv[i][2:]] = argv[i + 1]
for k in ("out", "answer", "query_id", "maestro_step_instance_uuid", "sleep"):
    if k not in args and k in os.environ:
        args[k] = os.environ[k]
if args.get("sleep"):
    time.sleep(float(args["sleep"]))
with open(args["out"], "a") as f:
    f.write(json.dumps(args) + "\n")
`

func newAWSJobsFixture(t *testing.T) *awsJobsFixture {
	t.Helper()
	ctx := context.Background()
	cfg := localstack.Config(t)
	f := &awsJobsFixture{athena: athenasdk.NewFromConfig(cfg), glue: gluesdk.NewFromConfig(cfg), sfn: sfn.NewFromConfig(cfg)}
	suffix := fmt.Sprint(time.Now().UnixNano())
	f.bucket = "athena-results-" + suffix
	if _, err := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }).CreateBucket(ctx,
		&s3.CreateBucketInput{Bucket: aws.String(f.bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "job.py")
	if err := os.WriteFile(script, []byte(glueScript), 0o644); err != nil {
		t.Fatal(err)
	}
	f.glueOut = filepath.Join(dir, "runs.jsonl")
	for _, name := range []*string{&f.glueJob, &f.glueSleepJob} {
		*name = "etl-" + fmt.Sprint(time.Now().UnixNano())
		args := map[string]string{"--out": f.glueOut}
		if name == &f.glueSleepJob {
			args["--sleep"] = "60"
		}
		if _, err := f.glue.CreateJob(ctx, &gluesdk.CreateJobInput{Name: name, Role: aws.String("arn:aws:iam::000000000000:role/glue"),
			Command: &gluetypes.JobCommand{Name: aws.String("pythonshell"), ScriptLocation: aws.String(script), PythonVersion: aws.String("3.9")},
			// No MaxCapacity: ministack answers a fractional one as
			// AllocatedCapacity, an integer the SDK cannot read.
			DefaultArguments: args}); err != nil {
			t.Fatalf("create glue job: %v", err)
		}
	}
	fn := deployStepFn(t, lambda.NewFromConfig(cfg))
	fnARN := fmt.Sprintf("arn:aws:lambda:%s:000000000000:function:%s", localstack.Region, fn)
	machine := func(name, def string) string {
		out, err := f.sfn.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{Name: aws.String(name + "-" + suffix), Definition: aws.String(def),
			RoleArn: aws.String("arn:aws:iam::000000000000:role/sfn")})
		if err != nil {
			t.Fatalf("create state machine: %v", err)
		}
		return aws.ToString(out.StateMachineArn)
	}
	f.lambdaMachine = machine("double", fmt.Sprintf(`{"StartAt":"Double","States":{"Double":{"Type":"Task","Resource":%q,"End":true}}}`, fnARN))
	f.waitMachine = machine("wait", `{"StartAt":"Wait","States":{"Wait":{"Type":"Wait","Seconds":600,"End":true}}}`)
	return f
}

// glueRuns reads the runs the Glue script recorded.
func (f *awsJobsFixture) glueRuns(t *testing.T) []map[string]string {
	t.Helper()
	raw, err := os.ReadFile(f.glueOut)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var runs []map[string]string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var m map[string]string
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("glue run line %q: %v", line, err)
		}
		runs = append(runs, m)
	}
	return runs
}

func awsJobRegistry(t *testing.T, f *awsJobsFixture, cfg awsjob.Config) stepruntime.Registry {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = flowtest.Logger()
	}
	ar, err := athena.New(f.athena, cfg)
	if err != nil {
		t.Fatal(err)
	}
	gr, err := glue.New(f.glue, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := stepfunctions.New(f.sfn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return stepruntime.Registry{athena.Type: ar, glue.Type: gr, stepfunctions.Type: sr, "NoOp": stepruntime.NoOp{}}
}

// pipeline is a workflow whose outputs flow from step to step: an Athena
// query, a Glue Python shell job given the query's id and first row, a
// Step Functions execution (a Lambda task) given the row's value, and a
// NoOp reading the execution's output.
func pipeline(id string, f *awsJobsFixture) string {
	return fmt.Sprintf(`{"workflow":{"id":%q,"params":{"n":{"type":"LONG","value":21}},"steps":[
	  {"step":{"id":"query","type":"Athena","transition":{"successors":{"load":"true"}},"params":{"athena":{"type":"MAP","value":{
	    "query":{"type":"STRING","value":"SELECT ${n} * 2 AS answer, 'nightly' AS name"},
	    "output_location":{"type":"STRING","value":"s3://%s/results/"}}}}}},
	  {"step":{"id":"load","type":"Glue","transition":{"successors":{"double":"true"}},"params":{
	    "answer":{"type":"STRING","expression":"params.getFromStep('query', 'first_row').get('answer')"},
	    "glue":{"type":"MAP","value":{"job_name":{"type":"STRING","value":%q},
	      "arguments":{"type":"STRING_MAP","value":{"answer":"${answer}","--query_id":"${query_execution_id@query}"}}}}}}},
	  {"step":{"id":"double","type":"StepFunctions","transition":{"successors":{"after":"true"}},"params":{
	    "step_functions":{"type":"MAP","value":{"state_machine_arn":{"type":"STRING","value":%q},
	      "input":{"type":"STRING","value":"{\"n\": ${answer@load}, \"name\": \"${state@load}\"}"}}}}}},
	  {"step":{"id":"after","type":"NoOp","params":{"got":{"type":"LONG","expression":"params.getFromStep('double', 'doubled')"}}}}
	]}}`, id, f.bucket, f.glueJob, f.lambdaMachine)
}

func stepParam(t *testing.T, env *flowtest.Env, inst *execution.Instance, step, name string) any {
	t.Helper()
	var p map[string]struct{ Value any }
	_ = json.Unmarshal(env.Attempts(inst, step)[0].Params, &p)
	return p[name].Value
}

// Athena, Glue and Step Functions steps against the emulator's services
// (Athena's SQL on DuckDB, the Glue job as a Python process, the state
// machine's Lambda task as a process), outputs flowing from each step into
// the next; then stops, which stop the jobs.
func TestAWSJobStepsInEmulator(t *testing.T) {
	ctx := context.Background()
	f := newAWSJobsFixture(t)
	env := flowtest.New(t)
	env.Engine(awsJobRegistry(t, f, awsjob.Config{MinPoll: 200 * time.Millisecond, MaxPoll: time.Second}), flow.Config{})

	t.Run("pipeline", func(t *testing.T) {
		env.Push(pipeline("awsjobs", f))
		inst := env.Start("awsjobs")
		if got := env.Wait(inst, 3*time.Minute); got.Status != instance.WorkflowSucceeded {
			for _, s := range []string{"query", "load", "double"} {
				for _, a := range env.Attempts(inst, s) {
					t.Logf("%s: %s %s", s, a.Status, a.Timeline)
				}
			}
			t.Fatalf("run ended %s", got.Status)
		}
		q := string(env.Attempts(inst, "query")[0].Outputs)
		for _, want := range []string{`"answer": "42"`, `"row_count"`, `"data_scanned_bytes"`, `"state"`, "SUCCEEDED", "s3://" + f.bucket + "/results/"} {
			if !strings.Contains(q, want) {
				t.Errorf("query outputs lack %s: %s", want, q)
			}
		}
		runs := f.glueRuns(t)
		if len(runs) != 1 || runs[0]["answer"] != "42" || runs[0]["query_id"] == "" ||
			runs[0]["maestro_step_instance_uuid"] != env.Attempts(inst, "load")[0].UUID {
			t.Fatalf("glue runs %v", runs)
		}
		if !strings.Contains(string(env.Attempts(inst, "query")[0].Outputs), runs[0]["query_id"]) {
			t.Errorf("the glue run got query id %s", runs[0]["query_id"])
		}
		if got := stepParam(t, env, inst, "after", "got"); got != float64(84) {
			t.Errorf("after.got = %v, want 84 (the state machine doubled the query's 42)", got)
		}
		if out := string(env.Attempts(inst, "double")[0].Outputs); !strings.Contains(out, `"echo"`) || !strings.Contains(out, "SUCCEEDED") {
			t.Errorf("execution outputs %s", out)
		}
	})

	t.Run("examples/athena-glue-sfn.yaml", func(t *testing.T) {
		raw, err := os.ReadFile("../examples/athena-glue-sfn.yaml")
		if err != nil {
			t.Fatal(err)
		}
		def := strings.NewReplacer("s3://my-athena-results/maestro/", "s3://"+f.bucket+"/example/", "nightly-load", f.glueJob,
			"arn:aws:states:us-east-1:123456789012:stateMachine:publish", f.lambdaMachine).Replace(string(raw))
		env.PushYAML(def)
		inst := env.Start("athena-glue-sfn")
		if got := env.Wait(inst, 3*time.Minute); got.Status != instance.WorkflowSucceeded {
			t.Fatalf("run ended %s", got.Status)
		}
		runs := f.glueRuns(t)
		if last := runs[len(runs)-1]; last["answer"] != "40480202" {
			t.Errorf("the glue run got %v", last)
		}
		if out := string(env.Attempts(inst, "publish")[0].Outputs); !strings.Contains(out, "80960404") {
			t.Errorf("publish outputs %s", out)
		}
		if got := stepParam(t, env, inst, "report", "published"); got != "SUCCEEDED" {
			t.Errorf("report.published = %v", got)
		}
	})

	t.Run("a failed query fails the step", func(t *testing.T) {
		env.Push(fmt.Sprintf(`{"workflow":{"id":"badquery","steps":[{"step":{"id":"query","type":"Athena","retry_policy":{"error_retry_limit":0},
		  "params":{"athena":{"type":"MAP","value":{"query":{"type":"STRING","value":"SELECT * FROM no_such_table_here"},
		    "output_location":{"type":"STRING","value":"s3://%s/results/"}}}}}}]}}`, f.bucket))
		inst := env.Start("badquery")
		if got := env.Wait(inst, time.Minute); got.Status != instance.WorkflowFailed {
			t.Fatalf("run ended %s", got.Status)
		}
		if a := env.Attempts(inst, "query"); len(a) != 1 || !strings.Contains(string(a[0].Timeline), "FAILED") {
			t.Fatalf("attempt %s %s", a[0].Status, a[0].Timeline)
		}
	})

	t.Run("stop stops the jobs", func(t *testing.T) {
		env.Push(fmt.Sprintf(`{"workflow":{"id":"longjobs","steps":[
		  {"step":{"id":"wait","type":"StepFunctions","params":{"step_functions":{"type":"MAP","value":{
		    "state_machine_arn":{"type":"STRING","value":%q}}}}}},
		  {"step":{"id":"sleep","type":"Glue","params":{"glue":{"type":"MAP","value":{"job_name":{"type":"STRING","value":%q}}}}}}
		]}}`, f.waitMachine, f.glueSleepJob))
		inst := env.Start("longjobs")
		execARN := env.WaitData(inst, "wait", awsjob.KeyJobID, time.Minute)[awsjob.KeyJobID].(string)
		runID := env.WaitData(inst, "sleep", awsjob.KeyJobID, time.Minute)[awsjob.KeyJobID].(string)
		if _, err := env.Runs.Act(ctx, "longjobs", inst.InstanceID, inst.RunID, run.ActionStop); err != nil {
			t.Fatal(err)
		}
		if got := env.Wait(inst, time.Minute); got.Status != instance.WorkflowStopped {
			t.Fatalf("run ended %s", got.Status)
		}
		ex, err := f.sfn.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(execARN)})
		if err != nil || ex.Status != "ABORTED" {
			t.Errorf("execution after the stop: %v %v", ex, err)
		}
		jr, err := f.glue.GetJobRun(ctx, &gluesdk.GetJobRunInput{JobName: aws.String(f.glueSleepJob), RunId: aws.String(runID)})
		if err != nil || jr.JobRun.JobRunState != gluetypes.JobRunStateStopped {
			t.Errorf("job run after the stop: %v %v", jr, err)
		}
	})
}

// An execution's status-change event (EventBridge -> SQS) ends the step:
// the step polls once an hour, so only the event can wake it in time.
func TestAWSJobEventWakesStep(t *testing.T) {
	ctx := context.Background()
	f := newAWSJobsFixture(t)
	cfg := localstack.Config(t)
	sq := sqs.NewFromConfig(cfg)
	suffix := fmt.Sprint(time.Now().UnixNano())
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("job-events-" + suffix)})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	eb := eventbridge.NewFromConfig(cfg)
	rule := "job-events-" + suffix
	pattern := fmt.Sprintf(`{"source":["aws.states"],"detail-type":["Step Functions Execution Status Change"],"detail":{"stateMachineArn":[%q]}}`, f.lambdaMachine)
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(rule), EventPattern: aws.String(pattern)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(rule), Targets: []ebtypes.Target{{Id: aws.String("engine"),
		Arn: aws.String(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])}}}); err != nil {
		t.Fatal(err)
	}

	env := flowtest.New(t)
	store := awsjob.NewStore(env.Pool)
	env.Engine(awsJobRegistry(t, f, awsjob.Config{Jobs: store, MinPoll: time.Hour, MaxPoll: time.Hour}), flow.Config{})
	consumer, err := awsjob.NewConsumer(awsjob.ConsumerConfig{Client: sq, QueueURL: aws.ToString(q.QueueUrl), Jobs: store,
		Sources: []awsjob.EventSource{stepfunctions.Event}, WaitTime: time.Second, Logger: flowtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := consumer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(consumer.Stop)

	env.Push(fmt.Sprintf(`{"workflow":{"id":"woken","steps":[{"step":{"id":"double","type":"StepFunctions","params":{
	  "step_functions":{"type":"MAP","value":{"state_machine_arn":{"type":"STRING","value":%q},
	    "input":{"type":"MAP","value":{"n":{"type":"LONG","value":5},"name":{"type":"STRING","value":"event"}}}}}}}}]}}`, f.lambdaMachine))
	inst := env.Start("woken")
	if got := env.Wait(inst, 2*time.Minute); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", got.Status)
	}
	if out := string(env.Attempts(inst, "double")[0].Outputs); !strings.Contains(out, `"doubled"`) || !strings.Contains(out, "10") {
		t.Errorf("outputs %s", out)
	}
	var left int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM aws_job`).Scan(&left); err != nil || left != 0 {
		t.Errorf("registered jobs left after the step ended: %d %v", left, err)
	}
}

// The engine reaches AWS through the SDK's standard configuration: with
// AWS_REGION, AWS_ENDPOINT_URL and credentials in the environment (as for
// `maestro dev` pointed at the emulator), the registry's Athena step runs
// with no other setting.
func TestAthenaStepWithTheStandardAWSConfiguration(t *testing.T) {
	ctx := context.Background()
	f := newAWSJobsFixture(t)
	t.Setenv("AWS_ENDPOINT_URL", localstack.Endpoint(t))
	t.Setenv("AWS_REGION", localstack.Region)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("MAESTRO_AWS_ENDPOINT", "")
	env := flowtest.New(t)
	reg, err := registry.New(ctx, registry.FromEnv(os.Getenv), env.Pool, flowtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	env.Engine(reg, flow.Config{})
	env.Push(fmt.Sprintf(`{"workflow":{"id":"stdconf","steps":[{"step":{"id":"query","type":"Athena",
	  "params":{"athena":{"type":"MAP","value":{"query":{"type":"STRING","value":"SELECT 7 AS seven"},
	    "output_location":{"type":"STRING","value":"s3://%s/std/"}}}}}}]}}`, f.bucket))
	inst := env.Start("stdconf")
	if got := env.Wait(inst, time.Minute); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", got.Status)
	}
	if out := string(env.Attempts(inst, "query")[0].Outputs); !strings.Contains(out, `"seven": "7"`) {
		t.Errorf("outputs %s", out)
	}
}

// A new owner of an attempt whose start's answer was never written finds
// the job the first owner started, in each service, instead of starting a
// second one: the Athena query by the marker in its text, the Glue run by
// its argument, the execution by its name.
func TestAWSJobsFoundAgainInEmulator(t *testing.T) {
	ctx := context.Background()
	f := newAWSJobsFixture(t)
	reg := awsJobRegistry(t, f, awsjob.Config{MinPoll: 100 * time.Millisecond, MaxPoll: time.Second})
	workgroup := "found-" + fmt.Sprint(time.Now().UnixNano())
	if _, err := f.athena.CreateWorkGroup(ctx, &athenasdk.CreateWorkGroupInput{Name: aws.String(workgroup)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		typ, name string
		param     map[string]any
		count     func() int
	}{
		{athena.Type, athena.Param, map[string]any{"query": "SELECT 1 AS one", "workgroup": workgroup, "output_location": "s3://" + f.bucket + "/found/"}, func() int {
			out, err := f.athena.ListQueryExecutions(ctx, &athenasdk.ListQueryExecutionsInput{WorkGroup: aws.String(workgroup)})
			if err != nil {
				t.Fatal(err)
			}
			return len(out.QueryExecutionIds)
		}},
		{glue.Type, glue.Param, map[string]any{"job_name": f.glueSleepJob}, func() int {
			out, err := f.glue.GetJobRuns(ctx, &gluesdk.GetJobRunsInput{JobName: aws.String(f.glueSleepJob)})
			if err != nil {
				t.Fatal(err)
			}
			return len(out.JobRuns)
		}},
		{stepfunctions.Type, stepfunctions.Param, map[string]any{"state_machine_arn": f.waitMachine}, func() int {
			out, err := f.sfn.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(f.waitMachine)})
			if err != nil {
				t.Fatal(err)
			}
			return len(out.Executions)
		}},
	} {
		t.Run(c.typ, func(t *testing.T) {
			rt := reg[c.typ]
			uuid := fmt.Sprintf("7d3c2b1a-0000-4000-8000-%012d", time.Now().UnixNano()%1e12)
			a := &stepruntime.Attempt{WorkflowID: "wf", InstanceID: 1, RunID: 1, StepID: "s", AttemptID: 1, UUID: uuid,
				Params: map[string]any{c.name: c.param}}
			var intent map[string]any
			a.Record = func(_ context.Context, d map[string]any) error { intent = d; return nil }
			if r := rt.Start(ctx, a); r.State != stepruntime.Done {
				t.Fatalf("start: %s %s", r.State, r.Message)
			}
			r := rt.Execute(ctx, a)
			if r.State != stepruntime.Continue || r.Data[awsjob.KeyJobID] == nil {
				t.Fatalf("launch: %s %v %s", r.State, r.Data, r.Message)
			}
			id := r.Data[awsjob.KeyJobID]
			before := c.count()
			a.Data = intent // the engine died before the answer was written
			r = rt.Execute(ctx, a)
			if r.State != stepruntime.Continue || r.Data[awsjob.KeyJobID] != id {
				t.Fatalf("new owner: %s %v %s (first job %v)", r.State, r.Data, r.Message, id)
			}
			if after := c.count(); after != before {
				t.Fatalf("%d jobs before the new owner, %d after", before, after)
			}
			a.Data = r.Data
			if r := rt.Terminate(ctx, a); r.State != stepruntime.Stopped {
				t.Errorf("terminate: %s %s", r.State, r.Message)
			}
		})
	}
}
