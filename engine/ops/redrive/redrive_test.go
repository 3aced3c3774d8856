package redrive_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/ops/redrive"
	"github.com/maestro-aws/maestro/localstack"
)

// queues makes a source queue whose redrive policy names a new dead-letter
// queue, in the emulator, and returns their URLs.
func queues(t *testing.T, client *sqs.Client) (source, dlq string) {
	t.Helper()
	ctx := context.Background()
	id := uuid.NewString()[:8]
	d, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("redrive-dlq-" + id)})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: d.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"5"}`, attrs.Attributes["QueueArn"])
	s, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("redrive-src-" + id),
		Attributes: map[string]string{"RedrivePolicy": policy}})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(s.QueueUrl), aws.ToString(d.QueueUrl)
}

// fill sends n messages, each with a message attribute, to url.
func fill(t *testing.T, client *sqs.Client, url string, n int) {
	t.Helper()
	for i := range n {
		if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url),
			MessageBody: aws.String(`{"n":` + strconv.Itoa(i) + `}`),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"type": {DataType: aws.String("String"), StringValue: aws.String("SIGNAL")}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// drain receives every message of url and returns their bodies, checking
// each kept its attribute.
func drain(t *testing.T, client *sqs.Client, url string) []string {
	t.Helper()
	var bodies []string
	for empty := 0; empty < 5; { // an empty answer is not proof of an empty queue
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			if a, ok := m.MessageAttributes["type"]; !ok || aws.ToString(a.StringValue) != "SIGNAL" {
				t.Errorf("message %s lost its attribute: %v", aws.ToString(m.Body), m.MessageAttributes)
			}
			if _, err := client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.Sort(bodies)
	return bodies
}

// A re-drive moves every message of the dead-letter queue to the queue
// whose redrive policy names it, body and attributes (at least once, as
// SQS delivers); the dead-letter queue is left empty. With Max it moves that many.
func TestRedriveMovesEveryMessageBack(t *testing.T) {
	t.Parallel()
	client := sqs.NewFromConfig(localstack.Config(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	source, dlq := queues(t, client)
	fill(t, client, dlq, 23)

	res, err := redrive.Run(ctx, client, redrive.Options{DLQ: dlq, Target: source, Max: 5})
	if err != nil || res.Moved != 5 {
		t.Fatalf("Max 5: moved %d, %v", res.Moved, err)
	}
	// The target found from the dead-letter queue's source queues, or
	// named when the service cannot list them.
	res2, err := redrive.Run(ctx, client, redrive.Options{DLQ: dlq})
	if err != nil {
		t.Logf("no target found by ListDeadLetterSourceQueues (%v): naming it", err)
		res2, err = redrive.Run(ctx, client, redrive.Options{DLQ: dlq, Target: source})
	}
	if err != nil {
		t.Fatal(err)
	}
	// 18 or more: a SendMessage of the fill that the SDK retried may have
	// put a message in the dead-letter queue twice (at least once).
	if res2.Target != source || res2.Moved < 18 {
		t.Fatalf("second re-drive: %+v, want the other 18 moved to %s", res2, source)
	}
	got := drain(t, client, source)
	var want []string
	for i := range 23 {
		want = append(want, `{"n":`+strconv.Itoa(i)+`}`)
	}
	slices.Sort(want)
	// A standard queue is at least once: a SendMessage the SDK retried
	// after a broken connection (the emulator had stored it) arrives twice.
	// What a re-drive promises is that every message arrives.
	if distinct := slices.Compact(slices.Clone(got)); !slices.Equal(distinct, want) {
		t.Errorf("the source queue holds %d messages %v, want each of the 23", len(got), got)
	} else if len(got) != len(want) {
		t.Logf("%d of the messages arrived twice (SDK retries)", len(got)-len(want))
	}
	if left := drain(t, client, dlq); len(left) != 0 {
		t.Errorf("%d messages left in the dead-letter queue", len(left))
	}
}

// Bad options are refused before anything moves.
func TestRedriveRefusesBadOptions(t *testing.T) {
	t.Parallel()
	if _, err := redrive.Run(context.Background(), nil, redrive.Options{}); err == nil {
		t.Error("no dead-letter queue: accepted")
	}
	if _, err := redrive.Run(context.Background(), nil, redrive.Options{DLQ: "q", Target: "q"}); err == nil {
		t.Error("the dead-letter queue as its own target: accepted")
	}
}
