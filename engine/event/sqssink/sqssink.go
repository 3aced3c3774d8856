// Package sqssink is the engine's sink of events in AWS: it hands them to
// the internal events queue (MAESTRO_EVENT_QUEUE_URL) with SendMessageBatch,
// ten to a call and several calls at once; functions/publisher turns them
// into external events on SNS.
package sqssink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/tracing"
)

// traceEntry gives an entry its run's trace (docs/tracing.md): the
// AWSTraceHeader system attribute, which X-Ray and Lambda's SQS event
// source read, and a traceparent message attribute for OpenTelemetry
// consumers.
func traceEntry(e *types.SendMessageBatchRequestEntry, traceparent string) {
	if traceparent == "" {
		return
	}
	e.MessageAttributes = map[string]types.MessageAttributeValue{
		tracing.TraceparentHeader: {DataType: aws.String("String"), StringValue: aws.String(traceparent)},
	}
	if h := tracing.TraceparentToXRay(traceparent); h != "" {
		e.MessageSystemAttributes = map[string]types.MessageSystemAttributeValue{
			string(types.MessageSystemAttributeNameForSendsAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(h)},
		}
	}
}

// API is the part of the SQS client the sink uses.
type API interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// MaxBatch is SQS's limit of entries per SendMessageBatch.
const MaxBatch = 10

// Config configures a Sink.
type Config struct {
	Client   API
	QueueURL string
	// Concurrency is how many SendMessageBatch calls run at once (default
	// 8).
	Concurrency int
	// Attempts is how often an entry SQS failed is sent again within one
	// Publish before the batch is reported failed (default 5).
	Attempts int
	Logger   *slog.Logger
}

// Sink sends events to an SQS queue. An entry SQS refuses as the sender's
// fault (a malformed or oversized message) can never be sent: it is logged
// and skipped. Any other failure is retried.
type Sink struct {
	cfg Config

	mu sync.Mutex
	// sent holds the events of the batch being published that SQS has
	// taken, so that when the forwarder offers the batch again only the
	// rest is sent.
	sent map[event.Position]bool
}

// New builds the sink.
func New(cfg Config) (*Sink, error) {
	if cfg.Client == nil || cfg.QueueURL == "" || cfg.Logger == nil {
		return nil, errors.New("sqssink: Config.Client, QueueURL and Logger are required")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	return &Sink{cfg: cfg, sent: map[event.Position]bool{}}, nil
}

// Publish sends the events; it returns nil once SQS holds every one.
func (s *Sink) Publish(ctx context.Context, evs []event.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	todo := make([]event.Event, 0, len(evs))
	for _, e := range evs {
		if !s.sent[e.Position] {
			todo = append(todo, e)
		}
	}
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
		sem   = make(chan struct{}, s.cfg.Concurrency)
		okMu  sync.Mutex
	)
	for i := 0; i < len(todo); i += MaxBatch {
		chunk := todo[i:min(i+MaxBatch, len(todo))]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			done, err := s.send(ctx, chunk)
			okMu.Lock()
			for _, p := range done {
				s.sent[p] = true
			}
			okMu.Unlock()
			if err != nil {
				errMu.Lock()
				if first == nil {
					first = err
				}
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	clear(s.sent)
	return nil
}

// send sends one chunk, retrying the entries SQS failed; it returns the
// events that are in the queue (or skipped for good).
func (s *Sink) send(ctx context.Context, chunk []event.Event) ([]event.Position, error) {
	var done []event.Position
	pending := chunk
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		entries := make([]types.SendMessageBatchRequestEntry, len(pending))
		for i, e := range pending {
			entries[i] = types.SendMessageBatchRequestEntry{
				Id:          aws.String(strconv.Itoa(i)),
				MessageBody: aws.String(string(event.Wire(e))),
			}
			traceEntry(&entries[i], e.TraceContext)
		}
		out, err := s.cfg.Client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(s.cfg.QueueURL), Entries: entries})
		if err != nil {
			if attempt >= s.cfg.Attempts || ctx.Err() != nil {
				return done, fmt.Errorf("send %d events to SQS: %w", len(pending), err)
			}
		} else {
			var retry []event.Event
			failed := map[int]bool{}
			for _, f := range out.Failed {
				i, convErr := strconv.Atoi(aws.ToString(f.Id))
				if convErr != nil || i < 0 || i >= len(pending) {
					continue
				}
				failed[i] = true
				if f.SenderFault {
					s.cfg.Logger.Error("SQS refused an event as malformed; it is skipped",
						"event_id", pending[i].EventID(), "code", aws.ToString(f.Code), "message", aws.ToString(f.Message))
					done = append(done, pending[i].Position)
					continue
				}
				retry = append(retry, pending[i])
			}
			for i, e := range pending {
				if !failed[i] {
					done = append(done, e.Position)
				}
			}
			if len(retry) == 0 {
				return done, nil
			}
			if attempt >= s.cfg.Attempts {
				return done, fmt.Errorf("SQS failed %d of %d events (first %s)", len(retry), len(pending), retry[0].EventID())
			}
			pending = retry
		}
		select {
		case <-ctx.Done():
			return done, ctx.Err()
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}
