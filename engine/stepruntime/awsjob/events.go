package awsjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// EventSource says how to read one service's state-change events:
// EventBridge events with Source and DetailType whose detail holds the
// job's id in IDField, for the jobs registered under Service.
type EventSource struct {
	Source     string
	DetailType string
	IDField    string
	Service    string
}

// SQS is the part of the SQS client the consumer uses; *sqs.Client has it.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Waker wakes the attempt waiting for a job; *Store has it.
type Waker interface {
	Wake(ctx context.Context, service, jobID string) (bool, error)
}

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	// Client reads the queue (required).
	Client SQS
	// QueueURL is the queue EventBridge delivers the services' events to
	// (MAESTRO_AWS_JOB_EVENTS_QUEUE; required).
	QueueURL string
	// Jobs wakes the attempts (required).
	Jobs Waker
	// Sources are the events understood; others are dropped.
	Sources []EventSource
	// WaitTime is the long poll of one receive (20 s, SQS's maximum).
	WaitTime time.Duration
	// Logger (required).
	Logger *slog.Logger
}

// Consumer reads the services' state-change events from SQS and wakes the
// attempts waiting for the jobs they name. Every engine node may run one
// on the same queue: a wake-up is a step_update message routed to the
// attempt's flow group, whichever node receives the event. An event is
// deleted once handled; one whose wake-up could not be written comes back
// after the queue's visibility timeout. A lost event costs only time: the
// attempt's own poll finds the job's end.
type Consumer struct {
	cfg ConsumerConfig

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewConsumer checks cfg and returns a consumer.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if cfg.Client == nil || cfg.QueueURL == "" || cfg.Jobs == nil || cfg.Logger == nil {
		return nil, errors.New("awsjob: ConsumerConfig needs Client, QueueURL, Jobs and Logger")
	}
	if cfg.WaitTime <= 0 || cfg.WaitTime > 20*time.Second {
		cfg.WaitTime = 20 * time.Second
	}
	return &Consumer{cfg: cfg}, nil
}

// Start starts receiving; it returns at once.
func (c *Consumer) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		return errors.New("awsjob: consumer already started")
	}
	ctx, c.cancel = context.WithCancel(ctx)
	c.done = make(chan struct{})
	go c.loop(ctx)
	return nil
}

// Stop stops receiving and waits for the loop to end; it is idempotent.
func (c *Consumer) Stop() {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (c *Consumer) loop(ctx context.Context) {
	defer close(c.done)
	failures := 0
	for ctx.Err() == nil {
		if err := c.ReceiveOnce(ctx); err != nil && ctx.Err() == nil {
			failures++
			c.cfg.Logger.Warn("receive AWS job events", "queue_url", c.cfg.QueueURL, "error", err.Error())
			select {
			case <-ctx.Done():
			case <-time.After(min(time.Duration(failures)*time.Second, 30*time.Second)):
			}
			continue
		}
		failures = 0
	}
}

// ReceiveOnce receives one batch of events (waiting up to WaitTime for
// one), wakes their attempts and deletes the events handled.
func (c *Consumer) ReceiveOnce(ctx context.Context) error {
	out, err := c.cfg.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(c.cfg.QueueURL),
		MaxNumberOfMessages: 10, WaitTimeSeconds: int32(c.cfg.WaitTime / time.Second)})
	if err != nil {
		return fmt.Errorf("receive from %s: %w", c.cfg.QueueURL, err)
	}
	var done []sqstypes.DeleteMessageBatchRequestEntry
	for i, m := range out.Messages {
		if err := c.Handle(ctx, aws.ToString(m.Body)); err != nil {
			c.cfg.Logger.Warn("AWS job event not handled; it comes back", "message_id", aws.ToString(m.MessageId), "error", err.Error())
			continue
		}
		done = append(done, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
	}
	if len(done) == 0 {
		return nil
	}
	if _, err := c.cfg.Client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(c.cfg.QueueURL), Entries: done}); err != nil {
		return fmt.Errorf("delete handled events: %w", err)
	}
	return nil
}

// event is an EventBridge event as delivered to an SQS target.
type event struct {
	Source     string                     `json:"source"`
	DetailType string                     `json:"detail-type"`
	Detail     map[string]json.RawMessage `json:"detail"`
}

// Handle wakes the attempt an event is for. An event that is not one of
// the sources, or names no job, is no error: it is dropped.
func (c *Consumer) Handle(ctx context.Context, body string) error {
	var e event
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		c.cfg.Logger.Warn("dropped a message that is not an EventBridge event", "error", err.Error())
		return nil
	}
	for _, s := range c.cfg.Sources {
		if s.Source != e.Source || s.DetailType != e.DetailType {
			continue
		}
		var id string
		if err := json.Unmarshal(e.Detail[s.IDField], &id); err != nil || id == "" {
			c.cfg.Logger.Warn("dropped an event without its job id", "source", e.Source, "detail_type", e.DetailType, "field", s.IDField)
			return nil
		}
		if _, err := c.cfg.Jobs.Wake(ctx, s.Service, id); err != nil {
			return err
		}
		return nil
	}
	return nil
}
