package batch_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsbatch "github.com/aws/aws-sdk-go-v2/service/batch"

	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch/batchtest"
)

// pollsOver drives one attempt of a job that never ends for d on a
// simulated clock, as the engine does (each Execute at the delay the last
// one asked for), and returns the DescribeJobs calls made.
func pollsOver(t testing.TB, d time.Duration) int { return pollsOverWith(t, d, nil) }

// pollsOverWith is pollsOver on an engine whose jobs registry is jobs.
func pollsOverWith(t testing.TB, d time.Duration, jobs awsjob.Registry) int {
	// The intent's time is the protocol's (the real clock); the simulated
	// one starts there.
	now := time.Now()
	fake := batchtest.New()
	rt, err := batch.New(batch.Config{Client: fake, JobQueue: "q", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Jobs: jobs, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	a := attempt(map[string]any{"RUN_FOR": "1000h"}, nil)
	delete(a.Params[batch.ParamBatch].(map[string]any), "poll_interval")
	a.Record = func(context.Context, map[string]any) error { return nil }
	start := now
	step(a, func(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result { return rt.Start(ctx, a) })
	r := step(a, rt.Execute)
	for now.Sub(start) < d {
		now = now.Add(r.NextPollDelay)
		r = step(a, rt.Execute)
		if r.State != stepruntime.Continue {
			t.Fatalf("%s: %s", r.State, r.Message)
		}
	}
	return fake.Calls("DescribeJobs")
}

// What a long Batch step costs the engine while it runs, by polling (the
// fallback when no state-change event completes it): at most one
// DescribeJobs per minute on average over its first hour, one per two
// minutes once it is twenty minutes old, and nothing written per poll.
func TestPollCostPerInFlightStep(t *testing.T) {
	hour := pollsOver(t, time.Hour)
	perMinute := float64(hour) / 60
	steady := float64(pollsOver(t, 3*time.Hour)-pollsOver(t, 2*time.Hour)) / 60
	t.Logf("DescribeJobs per in-flight step per minute: %.2f over the first hour (%d calls), %.2f after two hours", perMinute, hour, steady)
	if perMinute > 1 || steady > 0.51 {
		t.Errorf("%.2f calls per step-minute in the first hour, %.2f later", perMinute, steady)
	}
}

// BenchmarkBatchPoll is the engine's CPU for one poll of a running Batch
// job through the real SDK client (signing, serialization, HTTP to a local
// server answering from memory): multiply by the calls per step-minute
// above for the CPU per in-flight step per minute.
func BenchmarkBatchPoll(b *testing.B) {
	fake := batchtest.New()
	srv := httptest.NewServer(fake.Handler())
	b.Cleanup(srv.Close)
	client := awsbatch.New(awsbatch.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	rt, err := batch.New(batch.Config{Client: client, JobQueue: "q", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	a := attempt(map[string]any{"RUN_FOR": "1000h"}, nil)
	step(a, rt.Start)
	step(a, rt.Execute)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if r := rt.Execute(context.Background(), a); r.State != stepruntime.Continue {
			b.Fatalf("%s: %s", r.State, r.Message)
		}
	}
}

// jobsRegistry registers nothing: an engine that receives the jobs'
// events, as far as the poll's pace goes.
type jobsRegistry struct{}

func (jobsRegistry) Register(context.Context, string, string, *stepruntime.Attempt) error { return nil }
func (jobsRegistry) Forget(context.Context, string, string) error                         { return nil }

// With the jobs' state-change events the poll is only the fallback: half
// the job's age, up to awsjob.DefaultMaxPoll, so at most one DescribeJobs
// per five minutes per in-flight step once it is ten minutes old.
func TestPollCostPerInFlightStepWithEvents(t *testing.T) {
	hour := pollsOverWith(t, time.Hour, jobsRegistry{})
	steady := float64(pollsOverWith(t, 3*time.Hour, jobsRegistry{})-pollsOverWith(t, 2*time.Hour, jobsRegistry{})) / 60
	t.Logf("DescribeJobs per in-flight step per minute with events: %.2f over the first hour (%d calls), %.2f after two hours",
		float64(hour)/60, hour, steady)
	if float64(hour)/60 > 0.5 || steady > 0.21 {
		t.Errorf("%.2f calls per step-minute in the first hour, %.2f later", float64(hour)/60, steady)
	}
}
