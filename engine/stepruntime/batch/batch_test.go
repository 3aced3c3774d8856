package batch_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsbatch "github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch/batchtest"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
)

func newRuntime(t *testing.T, api batch.API) stepruntime.Runtime {
	t.Helper()
	rt, err := batch.New(batch.Config{Client: api, JobQueue: "default-queue", PollInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// attempt is an attempt of a Batch step whose container runs with env.
func attempt(env map[string]any, extra map[string]any) *stepruntime.Attempt {
	spec := map[string]any{"job_queue": "etl-queue", "job_definition": "etl:3",
		"parameters":          map[string]any{"day": "20240101"},
		"container_overrides": map[string]any{"command": []any{"run", "--day", "Ref::day"}, "environment": env, "vcpus": "2"}}
	for k, v := range extra {
		spec[k] = v
	}
	a := &stepruntime.Attempt{WorkflowID: "wf", InstanceID: 3, RunID: 1, StepID: "job.1", AttemptID: 2, Type: batch.Type,
		UUID: uuid.NewString(), CallbackToken: "token-" + uuid.NewString(), Params: map[string]any{batch.ParamBatch: spec}}
	a.Record = func(context.Context, map[string]any) error { return nil }
	return a
}

func step(a *stepruntime.Attempt, call func(context.Context, *stepruntime.Attempt) stepruntime.Result) stepruntime.Result {
	r := call(context.Background(), a)
	if r.Data != nil {
		a.Data = r.Data
	}
	return r
}

// runToEnd starts the attempt and executes it until it ends, as the
// engine does (waiting NextPollDelay between polls).
func runToEnd(t *testing.T, rt stepruntime.Runtime, a *stepruntime.Attempt) stepruntime.Result {
	t.Helper()
	if r := step(a, rt.Start); r.State != stepruntime.Done {
		return r
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := step(a, rt.Execute)
		if r.State != stepruntime.Continue {
			return r
		}
		time.Sleep(r.NextPollDelay)
	}
	t.Fatal("the job never ended")
	return stepruntime.Result{}
}

func TestJobSucceeds(t *testing.T) {
	fake := batchtest.New()
	rt := newRuntime(t, fake)
	a := attempt(map[string]any{"RUN_FOR": "200ms", "DAY": "20240101"}, map[string]any{"tags": map[string]any{"team": "data"}})
	r := runToEnd(t, rt, a)
	if r.State != stepruntime.Done {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
	name := batch.JobName("", "job.1", a.UUID)
	if name != "maestro-job_1-"+a.UUID || fake.Submits(name) != 1 || fake.Calls("SubmitJob") != 1 {
		t.Fatalf("name %s, submits %d, SubmitJob calls %d", name, fake.Submits(name), fake.Calls("SubmitJob"))
	}
	id := a.Data[batch.KeyJobID].(string)
	job, _ := fake.Job(id)
	env := map[string]string{}
	for _, kv := range job.Container.Environment {
		env[aws.ToString(kv.Name)] = aws.ToString(kv.Value)
	}
	if aws.ToString(job.JobQueue) != "etl-queue" || aws.ToString(job.JobDefinition) != "etl:3" || job.Parameters["day"] != "20240101" ||
		strings.Join(job.Container.Command, " ") != "run --day Ref::day" || env["DAY"] != "20240101" ||
		env["MAESTRO_STEP_INSTANCE_UUID"] != a.UUID || env["MAESTRO_STEP_TOKEN"] != a.CallbackToken {
		t.Errorf("job %+v env %v", job, env)
	}
	if job.Tags[batch.TagStepInstanceUUID] != a.UUID || job.Tags["team"] != "data" || job.Tags[batch.TagStepID] != "job.1" {
		t.Errorf("tags %v", job.Tags)
	}
	want := map[string]any{batch.OutputJobID: id, batch.OutputStatus: "SUCCEEDED", batch.OutputExitCode: int64(0)}
	for k, v := range want {
		if got := r.Outputs[k].(params.Value).Value; got != v {
			t.Errorf("output %s = %v, want %v", k, got, v)
		}
	}
	if a.Data[batch.KeyLogStream] != "job/default/"+id {
		t.Errorf("data %v", a.Data)
	}
}

func TestJobEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]any
		want stepruntime.State
		msg  string
	}{
		{"non-zero exit is the user's error", map[string]any{"EXIT_CODE": "3"}, stepruntime.UserError, "exited with code 3"},
		{"no exit code is the platform's", map[string]any{"NO_EXIT_CODE": "1"}, stepruntime.PlatformError, "Host EC2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRuntime(t, batchtest.New())
			r := runToEnd(t, rt, attempt(tc.env, nil))
			if r.State != tc.want || !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("state %s: %s", r.State, r.Message)
			}
		})
	}
}

// The engine stopped after SubmitJob reached Batch but before the job's id
// was written: the next owner finds the job by its name and follows it.
func TestRecoveryFindsTheSubmittedJob(t *testing.T) {
	fake := batchtest.New()
	rt := newRuntime(t, fake)
	// Other jobs share the queue, so that the lookup pages.
	for range 5 {
		runToEnd(t, rt, attempt(map[string]any{}, nil))
	}
	a := attempt(map[string]any{"RUN_FOR": "300ms"}, nil)
	fake.LoseNextAnswer("SubmitJob", errors.New("connection reset by peer"))
	step(a, rt.Start)
	r := step(a, rt.Execute)
	if r.State != stepruntime.Continue || a.Data[external.KeyLaunch] != external.LaunchIntended {
		t.Fatalf("after a lost answer: %s %v: %s", r.State, a.Data, r.Message)
	}
	r = runToEnd(t, rt, a)
	name := batch.JobName("", a.StepID, a.UUID)
	if r.State != stepruntime.Done || fake.Submits(name) != 1 || fake.Calls("ListJobs") == 0 {
		t.Fatalf("state %s (%s), %d jobs submitted for the attempt, ListJobs %d", r.State, r.Message, fake.Submits(name), fake.Calls("ListJobs"))
	}
}

// A SubmitJob that never reached Batch: the lookup finds nothing and the
// job is submitted once, under the same name.
func TestRecoverySubmitsWhenNothingWasSubmitted(t *testing.T) {
	fake := batchtest.New()
	rt := newRuntime(t, fake)
	a := attempt(map[string]any{}, nil)
	fake.FailNext("SubmitJob", errors.New("dial tcp: connection refused"))
	r := runToEnd(t, rt, a)
	name := batch.JobName("", a.StepID, a.UUID)
	if r.State != stepruntime.Done || fake.Submits(name) != 1 || fake.Calls("SubmitJob") != 2 {
		t.Fatalf("state %s (%s), submits %d, SubmitJob calls %d", r.State, r.Message, fake.Submits(name), fake.Calls("SubmitJob"))
	}
}

func TestTerminateStopsTheJob(t *testing.T) {
	fake := batchtest.New()
	rt := newRuntime(t, fake)
	a := attempt(map[string]any{"RUN_FOR": "1h"}, nil)
	step(a, rt.Start)
	if r := step(a, rt.Execute); r.State != stepruntime.Continue {
		t.Fatalf("launch: %s %s", r.State, r.Message)
	}
	if r := step(a, rt.Terminate); r.State != stepruntime.Stopped {
		t.Fatalf("terminate: %s %s", r.State, r.Message)
	}
	job, _ := fake.Job(a.Data[batch.KeyJobID].(string))
	if job.Status != "FAILED" || !strings.HasPrefix(aws.ToString(job.StatusReason), batch.TerminateReasonPrefix) || fake.Calls("TerminateJob") != 1 {
		t.Fatalf("job %s (%s), TerminateJob calls %d", job.Status, aws.ToString(job.StatusReason), fake.Calls("TerminateJob"))
	}
	// A poll after the stop reads the job's end as stopped, not failed.
	if r := step(a, rt.Execute); r.State != stepruntime.Stopped {
		t.Fatalf("poll after terminate: %s %s", r.State, r.Message)
	}
}

func TestStatusState(t *testing.T) {
	code := func(n int32) *int32 { return &n }
	for _, tc := range []struct {
		status string
		exit   *int32
		reason string
		want   stepruntime.State
	}{
		{"SUBMITTED", nil, "", stepruntime.Continue},
		{"PENDING", nil, "", stepruntime.Continue},
		{"RUNNABLE", nil, "", stepruntime.Continue},
		{"STARTING", nil, "", stepruntime.Continue},
		{"RUNNING", nil, "", stepruntime.Continue},
		{"SUCCEEDED", code(0), "", stepruntime.Done},
		{"FAILED", code(2), "Essential container in task exited", stepruntime.UserError},
		{"FAILED", nil, "CannotPullContainerError", stepruntime.PlatformError},
		{"FAILED", code(0), "Job attempt duration exceeded timeout", stepruntime.PlatformError},
		{"FAILED", code(137), batch.TerminateReasonPrefix + ": wf/1/1 step a attempt 1", stepruntime.Stopped},
	} {
		if got := batch.StatusState(tc.status, tc.exit, tc.reason); got != tc.want {
			t.Errorf("%s %v %q: %s, want %s", tc.status, tc.exit, tc.reason, got, tc.want)
		}
	}
}

func TestBadSpecFailsAtStart(t *testing.T) {
	rt := newRuntime(t, batchtest.New())
	for _, tc := range []struct {
		name string
		spec map[string]any
		msg  string
	}{
		{"no param", nil, `needs the "batch" param`},
		{"no definition", map[string]any{"job_queue": "q"}, "batch.job_definition is required"},
		{"unknown field", map[string]any{"job_definition": "d", "queue": "q"}, "batch.queue: unknown field"},
		{"unknown override", map[string]any{"job_definition": "d", "container_overrides": map[string]any{"image": "x"}},
			"batch.container_overrides.image: unknown field"},
		{"reserved tag", map[string]any{"job_definition": "d", "tags": map[string]any{"maestro:x": "y"}}, "reserved"},
		{"bad timeout", map[string]any{"job_definition": "d", "timeout": "5s"}, "batch.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &stepruntime.Attempt{StepID: "s", UUID: uuid.NewString(), Params: map[string]any{}}
			if tc.spec != nil {
				a.Params[batch.ParamBatch] = tc.spec
			}
			r := rt.Start(context.Background(), a)
			if r.State != stepruntime.FatalError || !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("%s: %s", r.State, r.Message)
			}
		})
	}
}

func TestJobName(t *testing.T) {
	u := "6f1c2f9e-0d7b-4c55-9a43-1d2b3c4d5e6f"
	for _, tc := range []struct{ prefix, step, want string }{
		{"", "job.1", "maestro-job_1-" + u},
		{"nightly etl", "s", "nightly_etl-" + u},
		{"--x", "s", "x-" + u},
		{"", "", "maestro--" + u},
	} {
		if got := batch.JobName(tc.prefix, tc.step, u); got != tc.want {
			t.Errorf("JobName(%q, %q) = %q, want %q", tc.prefix, tc.step, got, tc.want)
		}
	}
	if got := batch.JobName(strings.Repeat("a", 300), "s", u); len(got) != 128 || !strings.HasSuffix(got, u) {
		t.Errorf("long name %d %q", len(got), got)
	}
}

// The poll slows down as the job ages: no API call per in-flight job more
// often than a tenth of its age (capped).
func TestPollBacksOff(t *testing.T) {
	now := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	fake := batchtest.New()
	rt, err := batch.New(batch.Config{Client: fake, JobQueue: "q", PollInterval: 10 * time.Second, MaxPollInterval: 2 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	a := attempt(map[string]any{"RUN_FOR": "1h"}, nil)
	delete(a.Params[batch.ParamBatch].(map[string]any), "poll_interval")
	step(a, rt.Start)
	step(a, rt.Execute)
	for _, tc := range []struct {
		age  time.Duration
		want time.Duration
	}{{time.Second, 10 * time.Second}, {5 * time.Minute, 30 * time.Second}, {time.Hour, 2 * time.Minute}} {
		a.Data[external.KeyIntendedAt] = now.Add(-tc.age).Format(time.RFC3339Nano)
		if r := step(a, rt.Execute); r.State != stepruntime.Continue || r.NextPollDelay != tc.want {
			t.Errorf("age %s: %s next poll in %s, want %s", tc.age, r.State, r.NextPollDelay, tc.want)
		}
	}
}

// The fake's HTTP face speaks the protocol the SDK's client speaks (the
// crash test's engine process reaches it that way).
func TestFakeOverTheSDK(t *testing.T) {
	fake := batchtest.New()
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	client := awsbatch.New(awsbatch.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	rt := newRuntime(t, client)
	a := attempt(map[string]any{"RUN_FOR": "100ms"}, map[string]any{"tags": map[string]any{"Team": "data"}})
	fake.LoseNextAnswer("SubmitJob", errors.New("lost"))
	r := runToEnd(t, rt, a)
	if r.State != stepruntime.Done || fake.Submits(batch.JobName("", a.StepID, a.UUID)) != 1 {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
	job, _ := fake.Job(a.Data[batch.KeyJobID].(string))
	if job.Tags["Team"] != "data" {
		t.Errorf("tags %v", job.Tags)
	}
	b := attempt(map[string]any{"RUN_FOR": "1h"}, nil)
	step(b, rt.Start)
	step(b, rt.Execute)
	if r := step(b, rt.Terminate); r.State != stepruntime.Stopped || fake.Calls("TerminateJob") != 1 {
		t.Fatalf("terminate %s %s", r.State, r.Message)
	}
}
