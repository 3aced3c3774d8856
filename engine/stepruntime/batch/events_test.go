package batch_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch/batchtest"
)

// noSQS is a queue with nothing in it: the test hands the consumer its
// event itself (localstack's tests deliver them through EventBridge and SQS).
type noSQS struct{}

func (noSQS) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return &sqs.ReceiveMessageOutput{}, nil
}

func (noSQS) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return &sqs.DeleteMessageBatchOutput{}, nil
}

// A job's "Batch Job State Change" event ends its step: the step polls
// once an hour, so only the event can end it in time, with one
// DescribeJobs after the submit's first look.
func TestBatchJobStateChangeEventEndsTheStep(t *testing.T) {
	t.Parallel()
	fake := batchtest.New()
	env := flowtest.New(t)
	store := awsjob.NewStore(env.Pool)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := batch.New(batch.Config{Client: fake, JobQueue: "default-queue", PollInterval: time.Hour, MaxPollInterval: time.Hour,
		Jobs: store, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	env.Engine(stepruntime.Registry{batch.Type: rt}, flow.Config{})
	wf := strings.NewReplacer("%RUN_FOR%", "300ms", "%TIMEOUT%", "1h",
		`"poll_interval":{"type":"STRING","value":"200ms"},`, "").Replace(batchWorkflow)
	env.Push(wf)
	inst := env.Start("batchjobs")
	id := env.WaitData(inst, "job", batch.KeyJobID, 30*time.Second)[batch.KeyJobID].(string)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if j, _ := fake.Job(id); j.Status == "SUCCEEDED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job never ended in the fake")
		}
	}
	var registered int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM aws_job WHERE service = 'batch' AND job_id = $1`, id).Scan(&registered); err != nil || registered != 1 {
		t.Fatalf("job %s registered %d times (%v)", id, registered, err)
	}
	c, err := awsjob.NewConsumer(awsjob.ConsumerConfig{Client: noSQS{}, QueueURL: "q", Jobs: store, Sources: []awsjob.EventSource{batch.Event}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	event := fmt.Sprintf(`{"version":"0","source":"aws.batch","detail-type":"Batch Job State Change",
	  "detail":{"jobName":"x","jobId":%q,"jobQueue":"arn:aws:batch:us-east-1:000000000000:job-queue/etl-queue","status":"SUCCEEDED"}}`, id)
	if err := c.Handle(context.Background(), event); err != nil {
		t.Fatal(err)
	}
	if got := env.Wait(inst, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", got.Status)
	}
	if n := fake.Calls("DescribeJobs"); n > 2 {
		t.Errorf("%d DescribeJobs calls; the event should need one", n)
	}
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM aws_job`).Scan(&registered); err != nil || registered != 0 {
		t.Errorf("registered jobs left after the step ended: %d %v", registered, err)
	}
}
