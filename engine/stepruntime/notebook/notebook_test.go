package notebook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch/batchtest"
	"github.com/maestro-aws/maestro/engine/stepruntime/ecstask"
	"github.com/maestro-aws/maestro/engine/stepruntime/ecstask/ecstasktest"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
	"github.com/maestro-aws/maestro/engine/stepruntime/notebook"
)

// objects is an in-memory bucket store.
type objects struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func (o *objects) put(bucket, key string, b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.objs == nil {
		o.objs = map[string][]byte{}
	}
	o.objs[bucket+"/"+key] = b
}

func (o *objects) Read(_ context.Context, bucket, key string, limit int64) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.objs[bucket+"/"+key]
	if !ok {
		return nil, errors.New("NoSuchKey")
	}
	return b, nil
}

var logger = slog.New(slog.NewTextHandler(io.Discard, nil))

// An executed notebook as papermill writes it: a cell that printed
// Maestro's marked output, one that glued a value with scrapbook.
const executed = `{"nbformat":4,"metadata":{"papermill":{}},"cells":[
 {"cell_type":"markdown","source":["# demo"]},
 {"cell_type":"code","outputs":[{"output_type":"stream","name":"stdout","text":["hello world\n",
   "MAESTRO_OUTPUT_START{\"params\":{\"foo\": {\"value\":\"bar\",\"type\":\"STRING\",\"evaluated_result\":\"bar\"}, \"rows\": {\"type\":\"LONG\",\"value\":42}}}MAESTRO_OUTPUT_END\n"]}]},
 {"cell_type":"code","outputs":[{"output_type":"display_data","data":{"application/scrapbook.scrap.json+json":{"name":"score","data":0.93,"encoder":"json","version":1},"text/plain":["0.93"]}}]}]}`

// sampleAttempt is the notebook step of Maestro's sample-notebook-wf.json.
func sampleAttempt(git bool) *stepruntime.Attempt {
	nb := map[string]any{"init_command": "python3 -m pip --no-cache-dir install notebook papermill &&",
		"input_path": "https://raw.githubusercontent.com/oss-maestro/maestro-notebook-templates/d51d251cbbb5660d343bc2bb0765881ebbfed6a0/examples/demo01.ipynb"}
	if git {
		nb["input_path"] = "examples/demo01.ipynb"
		nb["git_repo"] = "https://github.com/oss-maestro/maestro-notebook-templates.git"
	}
	return &stepruntime.Attempt{WorkflowID: "sample-notebook-wf", InstanceID: 7, RunID: 1, StepID: "job.2", AttemptID: 1, Type: notebook.Type,
		UUID: uuid.NewString(), StartTime: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC), CallbackToken: "tok",
		Params: map[string]any{"kubernetes": map[string]any{"image": "python:3"}, "notebook": nb,
			"script": "echo hello world", "foo": "default", "workflow_id": "sample-notebook-wf", "empty": ""},
		Record: func(context.Context, map[string]any) error { return nil }}
}

func call(a *stepruntime.Attempt, f func(context.Context, *stepruntime.Attempt) stepruntime.Result) stepruntime.Result {
	r := f(context.Background(), a)
	if r.Data != nil {
		a.Data = r.Data
	}
	return r
}

func runToEnd(t *testing.T, rt stepruntime.Runtime, a *stepruntime.Attempt) stepruntime.Result {
	t.Helper()
	if r := call(a, rt.Start); r.State != stepruntime.Done {
		return r
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := call(a, rt.Execute)
		if r.State != stepruntime.Continue {
			return r
		}
		time.Sleep(r.NextPollDelay)
	}
	t.Fatal("the notebook never ended")
	return stepruntime.Result{}
}

func batchCarrier(t *testing.T, fake *batchtest.Fake, objs notebook.Objects) stepruntime.Runtime {
	t.Helper()
	bj, err := batch.NewJob(batch.Config{Client: fake, JobQueue: "nb-queue", PollInterval: 50 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := notebook.New(notebook.Config{Carrier: notebook.CarrierBatch, Job: bj, JobDefinition: "papermill:1",
		OutputPrefix: "s3://notebooks/out", Objects: objs, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestSampleNotebookRunsInABatchJob(t *testing.T) {
	fake := batchtest.New()
	objs := &objects{}
	rt := batchCarrier(t, fake, objs)
	a := sampleAttempt(false)
	a.Params["notebook"].(map[string]any)["arg1"] = "20240101"
	wantOut := "s3://notebooks/out/maestro-output_20240506070809__7_job.2_" + a.UUID + ".ipynb"
	objs.put("notebooks", strings.TrimPrefix(wantOut, "s3://notebooks/"), []byte(executed))
	r := runToEnd(t, rt, a)
	if r.State != stepruntime.Done {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
	job, _ := fake.Job(a.Data[batch.KeyJobID].(string))
	if aws.ToString(job.JobDefinition) != "papermill:1" || aws.ToString(job.JobQueue) != "nb-queue" || len(job.Container.Command) != 3 ||
		job.Container.Command[0] != "/bin/sh" || job.Container.Command[1] != "-c" {
		t.Fatalf("job %+v command %q", job, job.Container.Command)
	}
	cmd := job.Container.Command[2]
	want := "python3 -m pip --no-cache-dir install notebook papermill && papermill " +
		"'https://raw.githubusercontent.com/oss-maestro/maestro-notebook-templates/d51d251cbbb5660d343bc2bb0765881ebbfed6a0/examples/demo01.ipynb' " +
		"'" + wantOut + "' -y '"
	if !strings.HasPrefix(cmd, want) || !strings.HasSuffix(cmd, "' --log-output '--start_timeout' '600'") {
		t.Fatalf("entrypoint %s", cmd)
	}
	var nbParams map[string]any
	pj := cmd[len(want):strings.Index(cmd, "' --log-output")]
	if err := json.Unmarshal([]byte(pj), &nbParams); err != nil {
		t.Fatalf("papermill params %q: %v", pj, err)
	}
	if nbParams["foo"] != "default" || nbParams["arg1"] != "20240101" || nbParams["attempt_number"] != float64(0) || nbParams["script"] != "echo hello world" ||
		nbParams["workflow_id"] != nil || nbParams["notebook"] != nil || nbParams["empty"] != nil {
		t.Errorf("papermill params %v", nbParams)
	}
	env := map[string]string{}
	for _, kv := range job.Container.Environment {
		env[aws.ToString(kv.Name)] = aws.ToString(kv.Value)
	}
	if env["MAESTRO_NOTEBOOK_OUTPUT"] != wantOut || env["MAESTRO_STEP_TOKEN"] != "tok" {
		t.Errorf("env %v", env)
	}
	got := map[string]any{}
	for k, v := range r.Outputs {
		if pv, ok := v.(params.Value); ok {
			v = pv.Value
		}
		got[k] = v
	}
	if got[notebook.OutputNotebook] != wantOut || got["foo"] != "bar" || got["rows"] != int64(42) || got["score"] != json.Number("0.93") ||
		got[batch.OutputExitCode] != int64(0) {
		t.Errorf("outputs %v", got)
	}
	if a.Data[notebook.KeyOutputNotebook] != wantOut {
		t.Errorf("data %v", a.Data)
	}
}

// A crash between the intent and the job's id: the carrier's lookup finds
// the job, so the notebook runs once.
func TestNotebookRecoveryFindsItsJob(t *testing.T) {
	fake := batchtest.New()
	objs := &objects{}
	rt := batchCarrier(t, fake, objs)
	a := sampleAttempt(false)
	a.Params["notebook"].(map[string]any)["output_path"] = "s3://elsewhere/run.ipynb"
	objs.put("elsewhere", "run.ipynb", []byte(executed))
	fake.LoseNextAnswer("SubmitJob", errors.New("connection reset"))
	r := runToEnd(t, rt, a)
	if r.State != stepruntime.Done || fake.Calls("SubmitJob") != 1 || len(fake.AllSubmits()) != 1 {
		t.Fatalf("state %s (%s), SubmitJob %d", r.State, r.Message, fake.Calls("SubmitJob"))
	}
}

func TestFailedNotebookNamesItsOutput(t *testing.T) {
	fake := batchtest.New()
	rt := batchCarrier(t, fake, &objects{})
	a := sampleAttempt(false)
	a.Params["kubernetes"].(map[string]any)["env"] = map[string]any{"EXIT_CODE": "1"}
	r := runToEnd(t, rt, a)
	if r.State != stepruntime.UserError || !strings.Contains(r.Message, "s3://notebooks/out/maestro-output_") {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
	// A stop terminates the carrier's job.
	b := sampleAttempt(false)
	b.Params["kubernetes"].(map[string]any)["env"] = map[string]any{"RUN_FOR": "1h"}
	call(b, rt.Start)
	call(b, rt.Execute)
	if r := call(b, rt.Terminate); r.State != stepruntime.Stopped || fake.Calls("TerminateJob") != 1 {
		t.Fatalf("terminate: %s %s", r.State, r.Message)
	}
}

func TestNotebookInAnECSTask(t *testing.T) {
	fake := ecstasktest.New()
	fake.Define("papermill", "nb")
	rt0, err := ecstask.New(ecstask.Config{Client: fake, Cluster: "jobs", Subnets: []string{"subnet-1"}, PollInterval: 50 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	objs := &objects{}
	rt, err := notebook.New(notebook.Config{Carrier: notebook.CarrierEcsTask, Job: rt0.(external.Runtime).Job, TaskDefinition: "papermill",
		OutputPrefix: "s3://notebooks/", Objects: objs, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	a := sampleAttempt(true)
	a.Params["notebook"].(map[string]any)["output_path"] = "out/git.ipynb"
	objs.put("notebooks", "out/git.ipynb", []byte(executed))
	r := runToEnd(t, rt, a)
	if r.State != stepruntime.Done {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
	task, _ := fake.Task(a.Data[ecstask.KeyTaskARN].(string))
	cmd := task.Overrides.ContainerOverrides[0].Command
	want := "python3 -m pip --no-cache-dir install notebook papermill && git clone 'https://github.com/oss-maestro/maestro-notebook-templates.git' " +
		"maestro_notebook_git_repo && cd \"maestro_notebook_git_repo/$(dirname 'examples/demo01.ipynb')\" && " +
		"papermill \"$(basename 'examples/demo01.ipynb')\" 's3://notebooks/out/git.ipynb' -y '"
	if len(cmd) != 3 || !strings.HasPrefix(cmd[2], want) {
		t.Fatalf("command %q", cmd)
	}
	if r.Outputs[notebook.OutputNotebook].(params.Value).Value != "s3://notebooks/out/git.ipynb" {
		t.Errorf("outputs %v", r.Outputs)
	}
}

func TestNotebookConfigErrors(t *testing.T) {
	bj, _ := batch.NewJob(batch.Config{Client: batchtest.New(), JobQueue: "q", Logger: logger})
	rt, err := notebook.New(notebook.Config{Carrier: notebook.CarrierBatch, Job: bj, JobDefinition: "papermill:1", Objects: &objects{}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	a := sampleAttempt(false)
	if r := rt.Start(context.Background(), a); r.State != stepruntime.FatalError || !strings.Contains(r.Message, "MAESTRO_NOTEBOOK_OUTPUT_PREFIX") {
		t.Errorf("no output prefix: %s %s", r.State, r.Message)
	}
	a.Params["notebook"] = map[string]string{"output_path": "s3://b/k.ipynb", "inputpath": "x"}
	if r := rt.Start(context.Background(), a); r.State != stepruntime.FatalError || !strings.Contains(r.Message, "notebook.input_path is required") {
		t.Errorf("bad notebook param: %s %s", r.State, r.Message)
	}
	if _, err := notebook.New(notebook.Config{Carrier: "Kubernetes", Job: bj, Objects: &objects{}, Logger: logger}); err == nil {
		t.Error("a Kubernetes carrier was accepted")
	}
}

func TestOutputs(t *testing.T) {
	for _, tc := range []struct {
		name, nb string
		want     map[string]any
		err      string
	}{
		{"none", `{"cells":[{"cell_type":"code","outputs":[{"output_type":"stream","text":"hi"}]}]}`, map[string]any{}, ""},
		{"typed and untyped", `{"cells":[{"cell_type":"code","outputs":[{"output_type":"stream","text":"x MAESTRO_OUTPUT_START{\"params\":{\"a\":{\"type\":\"DOUBLE\",\"value\":1.5},\"b\":{\"value\":\"t\"}}}MAESTRO_OUTPUT_END y"}]}]}`,
			map[string]any{"a": params.Value{Type: "DOUBLE", Value: 1.5}, "b": "t"}, ""},
		{"scrap of objects", `{"cells":[{"cell_type":"code","outputs":[{"output_type":"display_data","data":{"application/scrapbook.scrap.json+json":{"name":"rows","data":[{"k":1}]}}}]}]}`,
			map[string]any{"rows": params.Value{Type: "STRING", Value: `[{"k":1}]`}}, ""},
		{"unterminated", `{"cells":[{"cell_type":"code","outputs":[{"output_type":"stream","text":"MAESTRO_OUTPUT_START{"}]}]}`, nil, "without MAESTRO_OUTPUT_END"},
		{"not a notebook", `<html>`, nil, "not a notebook"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := notebook.Outputs([]byte(tc.nb))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tc.want)
			if string(gb) != string(wb) {
				t.Errorf("got %s, want %s", gb, wb)
			}
		})
	}
}
