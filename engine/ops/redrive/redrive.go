// Package redrive moves the messages of an SQS dead-letter queue back to
// the queue they failed from (maestro ops dlq redrive), with the real SQS
// API: each message is received from the dead-letter queue, sent to the
// target with its body, message attributes and FIFO group, and only then
// deleted from the dead-letter queue. A crash between the send and the
// delete sends that message again later: delivery stays at least once, as
// SQS's own is, and Maestro's consumers deduplicate (events by event_id,
// signals by name and instance id).
package redrive

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQS is the part of the SQS API a re-drive calls.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, opts ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
}

// Options say what to move.
type Options struct {
	// DLQ is the dead-letter queue's URL.
	DLQ string
	// Target is the queue's URL to move the messages to; empty: the one
	// queue whose redrive policy names DLQ (ListDeadLetterSourceQueues).
	Target string
	// Max bounds how many messages move; 0 means all there are.
	Max int
	// VisibilitySeconds hide a received message from other readers while
	// it moves (default 60).
	VisibilitySeconds int32
}

// Result is what a re-drive did.
type Result struct {
	DLQ    string `json:"dlq"`
	Target string `json:"target"`
	Moved  int    `json:"moved"`
}

// ErrNoTarget: the target could not be told from the dead-letter queue.
var ErrNoTarget = errors.New("cannot tell which queue to re-drive to")

// emptyReceives is how many empty receives in a row end a re-drive.
const emptyReceives = 3

// Run moves the messages of opts.DLQ to the target until the dead-letter
// queue answers none emptyReceives times in a row, or opts.Max moved. On an error, Result says how many
// moved before it; the message being moved stays in (or returns to) the
// dead-letter queue.
func Run(ctx context.Context, client SQS, opts Options) (Result, error) {
	res := Result{DLQ: opts.DLQ, Target: opts.Target}
	if opts.DLQ == "" {
		return res, errors.New("redrive: the dead-letter queue's URL is required")
	}
	if res.Target == "" {
		out, err := client.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(opts.DLQ)})
		if err != nil {
			return res, fmt.Errorf("%w (%v): name it", ErrNoTarget, err)
		}
		if len(out.QueueUrls) != 1 {
			return res, fmt.Errorf("%w: %d queues use %s as their dead-letter queue (%s): name one",
				ErrNoTarget, len(out.QueueUrls), opts.DLQ, strings.Join(out.QueueUrls, ", "))
		}
		res.Target = out.QueueUrls[0]
	}
	if res.Target == opts.DLQ {
		return res, errors.New("redrive: the target is the dead-letter queue itself")
	}
	vis := opts.VisibilitySeconds
	if vis <= 0 {
		vis = 60
	}
	empty := 0
	for opts.Max <= 0 || res.Moved < opts.Max {
		batch := int32(10)
		if opts.Max > 0 {
			batch = int32(min(10, opts.Max-res.Moved))
		}
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(opts.DLQ), MaxNumberOfMessages: batch, WaitTimeSeconds: 1, VisibilityTimeout: vis,
			MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{
				types.MessageSystemAttributeNameMessageGroupId, types.MessageSystemAttributeNameMessageDeduplicationId},
		})
		if err != nil {
			return res, fmt.Errorf("receive from %s: %w", opts.DLQ, err)
		}
		if len(out.Messages) == 0 {
			// An empty answer is not proof of an empty queue (SQS samples
			// its servers): done after emptyReceives in a row.
			if empty++; empty >= emptyReceives {
				return res, nil
			}
			continue
		}
		empty = 0
		for _, m := range out.Messages {
			in := &sqs.SendMessageInput{QueueUrl: aws.String(res.Target), MessageBody: m.Body, MessageAttributes: m.MessageAttributes}
			if g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; g != "" {
				in.MessageGroupId = aws.String(g)
				if d := m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)]; d != "" {
					in.MessageDeduplicationId = aws.String(d)
				}
			}
			if _, err := client.SendMessage(ctx, in); err != nil {
				return res, fmt.Errorf("send message %s to %s: %w", aws.ToString(m.MessageId), res.Target, err)
			}
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(opts.DLQ), ReceiptHandle: m.ReceiptHandle}); err != nil {
				return res, fmt.Errorf("delete message %s from %s after moving it (it will be moved again): %w", aws.ToString(m.MessageId), opts.DLQ, err)
			}
			res.Moved++
		}
	}
	return res, nil
}
