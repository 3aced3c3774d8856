package awsjob_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
)

// fakeService is an in-memory AWS service: jobs keyed by their start key.
type fakeService struct {
	mu       sync.Mutex
	jobs     map[string]*fakeJob // by id
	byKey    map[string]string
	starts   atomic.Int64
	describe atomic.Int64
	stops    atomic.Int64
	// lostAnswer makes the next Start create the job and answer with a
	// server error, as when the answer is lost.
	lostAnswer bool
	// final is the status a released job reports.
	final awsjob.Status
}

type fakeJob struct {
	key      string
	released bool
	stopped  bool
}

func newFake() *fakeService {
	return &fakeService{jobs: map[string]*fakeJob{}, byKey: map[string]string{},
		final: awsjob.Status{Phase: awsjob.Succeeded, State: "SUCCEEDED", Outputs: map[string]any{"rows": int64(3)}}}
}

func (f *fakeService) Name() string                       { return "fake" }
func (f *fakeService) Check(a *stepruntime.Attempt) error { return nil }

var serverError = &smithy.GenericAPIError{Code: "InternalServerException", Message: "boom", Fault: smithy.FaultServer}

func (f *fakeService) Start(_ context.Context, _ *stepruntime.Attempt, key string) (string, map[string]any, error) {
	f.starts.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	id := fmt.Sprintf("job-%d", len(f.jobs)+1)
	f.jobs[id] = &fakeJob{key: key}
	f.byKey[key] = id
	if f.lostAnswer {
		f.lostAnswer = false
		return "", nil, serverError
	}
	return id, map[string]any{"detail": "x"}, nil
}

func (f *fakeService) Find(_ context.Context, _ *stepruntime.Attempt, key string) (string, map[string]any, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.byKey[key]
	return id, nil, ok, nil
}

func (f *fakeService) Describe(_ context.Context, _ *stepruntime.Attempt, id string) (awsjob.Status, error) {
	f.describe.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.jobs[id]
	switch {
	case j == nil:
		return awsjob.Status{}, &smithy.GenericAPIError{Code: "ResourceNotFoundException", Message: "no such job"}
	case j.stopped:
		return awsjob.Status{Phase: awsjob.Cancelled, State: "STOPPED"}, nil
	case j.released:
		return f.final, nil
	}
	return awsjob.Status{Phase: awsjob.Running, State: "RUNNING"}, nil
}

func (f *fakeService) Stop(_ context.Context, _ *stepruntime.Attempt, id string) error {
	f.stops.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if j := f.jobs[id]; j != nil {
		j.stopped = true
	}
	return nil
}

func (f *fakeService) releaseAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		j.released = true
	}
}

func logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// registry is an in-memory awsjob.Registry.
type registry struct {
	mu   sync.Mutex
	jobs map[string]string // job id -> step uuid
}

func (r *registry) Register(_ context.Context, service, id string, a *stepruntime.Attempt) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs[service+"/"+id] = a.UUID
	return nil
}

func (r *registry) Forget(_ context.Context, service, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.jobs, service+"/"+id)
	return nil
}

// driver calls a runtime as the engine does, keeping the data.
type driver struct {
	t        *testing.T
	rt       stepruntime.Runtime
	a        *stepruntime.Attempt
	recorded []map[string]any
}

func newDriver(t *testing.T, rt stepruntime.Runtime) *driver {
	d := &driver{t: t, rt: rt, a: &stepruntime.Attempt{WorkflowID: "wf", InstanceID: 1, RunID: 1, StepID: "s", AttemptID: 1,
		UUID: "0b9c4c8e-3f43-4c1e-9b57-6f0e6c1d2a11"}}
	d.a.Record = func(_ context.Context, data map[string]any) error { d.recorded = append(d.recorded, data); return nil }
	return d
}

func (d *driver) call(f func(context.Context, *stepruntime.Attempt) stepruntime.Result) stepruntime.Result {
	r := f(context.Background(), d.a)
	if r.Data != nil {
		d.a.Data = r.Data
	}
	return r
}

func TestJobRunsToItsEnd(t *testing.T) {
	f := newFake()
	reg := &registry{jobs: map[string]string{}}
	rt, err := awsjob.New(f, awsjob.Config{Jobs: reg, Logger: logger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rt.(stepruntime.Woken); !ok {
		t.Fatal("an AWS job runtime must wake on step_update (its events)")
	}
	d := newDriver(t, rt)
	if r := d.call(rt.Start); r.State != stepruntime.Done {
		t.Fatalf("start %s %s", r.State, r.Message)
	}
	r := d.call(rt.Execute)
	if r.State != stepruntime.Continue || d.a.Data[awsjob.KeyJobID] != "job-1" || d.a.Data["detail"] != "x" {
		t.Fatalf("launch %s %v", r.State, d.a.Data)
	}
	if len(d.recorded) != 1 || d.recorded[0][external.KeyLaunch] != external.LaunchIntended {
		t.Fatalf("intent not recorded before the start: %v", d.recorded)
	}
	if reg.jobs["fake/job-1"] != d.a.UUID {
		t.Fatalf("job not registered for its events: %v", reg.jobs)
	}
	if r := d.call(rt.Execute); r.State != stepruntime.Continue || r.Data == nil || d.a.Data[awsjob.KeyJobState] != "RUNNING" {
		t.Fatalf("first poll %s %v", r.State, r.Data)
	}
	// Nothing new: no data, so the engine writes nothing.
	if r := d.call(rt.Execute); r.State != stepruntime.Continue || r.Data != nil {
		t.Fatalf("a poll that saw nothing new returned data %v", r.Data)
	}
	f.releaseAll()
	r = d.call(rt.Execute)
	if r.State != stepruntime.Done || r.Outputs["rows"] != int64(3) || d.a.Data[awsjob.KeyJobState] != "SUCCEEDED" {
		t.Fatalf("end %s %v %v", r.State, r.Outputs, d.a.Data)
	}
	if len(reg.jobs) != 0 {
		t.Errorf("ended job still registered: %v", reg.jobs)
	}
	if f.starts.Load() != 1 {
		t.Errorf("%d starts", f.starts.Load())
	}
}

func TestNewOwnerFindsTheJob(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("lost answer %v", lost), func(t *testing.T) {
			f := newFake()
			f.lostAnswer = lost
			rt, _ := awsjob.New(f, awsjob.Config{Logger: logger()})
			d := newDriver(t, rt)
			d.call(rt.Start)
			r := d.call(rt.Execute)
			if lost && (r.State != stepruntime.Continue || d.a.Data[external.KeyLaunch] != external.LaunchIntended) {
				t.Fatalf("lost answer: %s %v", r.State, d.a.Data)
			}
			// The engine died after the intent: the next owner has only it.
			d.a.Data = d.recorded[0]
			r = d.call(rt.Execute)
			if r.State != stepruntime.Continue || d.a.Data[awsjob.KeyJobID] != "job-1" || d.a.Data[external.KeyLaunch] != external.LaunchDone {
				t.Fatalf("recovery %s %v %s", r.State, d.a.Data, r.Message)
			}
			if f.starts.Load() != 1 {
				t.Fatalf("the job was started %d times", f.starts.Load())
			}
		})
	}
}

func TestEnds(t *testing.T) {
	for _, c := range []struct {
		final awsjob.Status
		want  stepruntime.State
	}{
		{awsjob.Status{Phase: awsjob.Failed, State: "FAILED", Message: "syntax error"}, stepruntime.UserError},
		{awsjob.Status{Phase: awsjob.Failed, State: "ERROR", Platform: true}, stepruntime.PlatformError},
		{awsjob.Status{Phase: awsjob.Cancelled, State: "ABORTED"}, stepruntime.UserError},
		{awsjob.Status{Phase: awsjob.Cancelled, State: "CANCELLED", Platform: true}, stepruntime.PlatformError},
		{awsjob.Status{Phase: awsjob.Stopped, State: "FAILED", Message: "Terminated by Maestro"}, stepruntime.Stopped},
	} {
		f := newFake()
		f.final = c.final
		rt, _ := awsjob.New(f, awsjob.Config{Logger: logger()})
		d := newDriver(t, rt)
		d.call(rt.Start)
		d.call(rt.Execute)
		f.releaseAll()
		if r := d.call(rt.Execute); r.State != c.want {
			t.Errorf("%s: %s %s, want %s", c.final.State, r.State, r.Message, c.want)
		}
	}
}

func TestStopStopsTheJob(t *testing.T) {
	f := newFake()
	reg := &registry{jobs: map[string]string{}}
	rt, _ := awsjob.New(f, awsjob.Config{Jobs: reg, Logger: logger()})
	d := newDriver(t, rt)
	d.call(rt.Start)
	d.call(rt.Execute)
	if r := d.call(rt.Terminate); r.State != stepruntime.Stopped || f.stops.Load() != 1 || !f.jobs["job-1"].stopped {
		t.Fatalf("terminate %s %s, %d stops", r.State, r.Message, f.stops.Load())
	}
	if len(reg.jobs) != 0 {
		t.Errorf("stopped job still registered: %v", reg.jobs)
	}
	// A poll after the stop reads the job's cancellation as the stop.
	if r := d.call(rt.Execute); r.State != stepruntime.Stopped || d.a.Data[awsjob.KeyStopRequested] != true {
		t.Fatalf("poll after the stop: %s %s %v", r.State, r.Message, d.a.Data)
	}
	// Stopped after the intent only (the start's answer not yet written):
	// the job is found and stopped.
	f = newFake()
	rt, _ = awsjob.New(f, awsjob.Config{Logger: logger()})
	d = newDriver(t, rt)
	d.call(rt.Start)
	d.call(rt.Execute)
	d.a.Data = d.recorded[0]
	if r := d.call(rt.Terminate); r.State != stepruntime.Stopped || !f.jobs["job-1"].stopped {
		t.Fatalf("terminate after the intent: %s %s", r.State, r.Message)
	}
}

// The poll backs off with the job's age: half of it, within [min, max].
func TestBackoff(t *testing.T) {
	f := newFake()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rt, _ := awsjob.New(f, awsjob.Config{MinPoll: 5 * time.Second, MaxPoll: 5 * time.Minute, Logger: logger(),
		Now: func() time.Time { return now }})
	d := newDriver(t, rt)
	d.call(rt.Start)
	if r := d.call(rt.Execute); r.NextPollDelay != 5*time.Second {
		t.Fatalf("first delay %s", r.NextPollDelay)
	}
	for _, c := range []struct{ age, want time.Duration }{
		{time.Second, 5 * time.Second}, {time.Minute, 30 * time.Second}, {4 * time.Minute, 2 * time.Minute}, {time.Hour, 5 * time.Minute},
	} {
		now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(c.age)
		if r := d.call(rt.Execute); r.NextPollDelay != c.want {
			t.Errorf("at age %s: delay %s, want %s", c.age, r.NextPollDelay, c.want)
		}
	}
}

// A failed describe keeps the attempt waiting; a job the service no
// longer knows is the platform's error.
func TestDescribeErrors(t *testing.T) {
	f := newFake()
	rt, _ := awsjob.New(f, awsjob.Config{Logger: logger()})
	d := newDriver(t, rt)
	d.call(rt.Start)
	d.call(rt.Execute)
	d.a.Data[awsjob.KeyJobID] = "job-404"
	if r := d.call(rt.Execute); r.State != stepruntime.PlatformError {
		t.Fatalf("unknown job: %s %s", r.State, r.Message)
	}
}

type waker struct {
	woken []string
	err   error
}

func (w *waker) Wake(_ context.Context, service, id string) (bool, error) {
	w.woken = append(w.woken, service+"/"+id)
	return true, w.err
}

func TestConsumerHandle(t *testing.T) {
	w := &waker{}
	c, err := awsjob.NewConsumer(awsjob.ConsumerConfig{Client: nopSQS{}, QueueURL: "q", Jobs: w, Logger: logger(),
		Sources: []awsjob.EventSource{{Source: "aws.glue", DetailType: "Glue Job State Change", IDField: "jobRunId", Service: "glue"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, body := range []string{
		`{"source":"aws.glue","detail-type":"Glue Job State Change","detail":{"jobName":"etl","jobRunId":"jr_1","state":"SUCCEEDED"}}`,
		`{"source":"aws.batch","detail-type":"Batch Job State Change","detail":{"jobId":"b1"}}`,
		`{"source":"aws.glue","detail-type":"Glue Job State Change","detail":{"jobName":"etl"}}`,
		`not json`,
	} {
		if err := c.Handle(ctx, body); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
	if len(w.woken) != 1 || w.woken[0] != "glue/jr_1" {
		t.Fatalf("woken %v", w.woken)
	}
	w.err = errors.New("database down")
	if err := c.Handle(ctx, `{"source":"aws.glue","detail-type":"Glue Job State Change","detail":{"jobRunId":"jr_2"}}`); err == nil {
		t.Fatal("a wake-up that failed must leave the event in the queue")
	}
}

type nopSQS struct{}

func (nopSQS) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return &sqs.ReceiveMessageOutput{}, nil
}

func (nopSQS) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return &sqs.DeleteMessageBatchOutput{}, nil
}

// pacedService is a service whose steps set their own first poll delay.
type pacedService struct {
	*fakeService
	first time.Duration
}

func (p pacedService) MinPoll(*stepruntime.Attempt) time.Duration { return p.first }

// A Pacer's delay replaces MinPoll (and raises MaxPoll when above it), and
// Slowdown sets the fraction of the job's age the poll waits.
func TestPacerAndSlowdown(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	rt, _ := awsjob.New(pacedService{newFake(), time.Second}, awsjob.Config{MinPoll: 30 * time.Second, MaxPoll: 2 * time.Minute, Slowdown: 10,
		Logger: logger(), Now: func() time.Time { return now }})
	d := newDriver(t, rt)
	d.call(rt.Start)
	if r := d.call(rt.Execute); r.NextPollDelay != time.Second {
		t.Fatalf("first delay %s, want the step's 1s", r.NextPollDelay)
	}
	for _, c := range []struct{ age, want time.Duration }{
		{5 * time.Second, time.Second}, {time.Minute, 6 * time.Second}, {time.Hour, 2 * time.Minute},
	} {
		now = start.Add(c.age)
		if r := d.call(rt.Execute); r.NextPollDelay != c.want {
			t.Errorf("at age %s: delay %s, want %s", c.age, r.NextPollDelay, c.want)
		}
	}
}
