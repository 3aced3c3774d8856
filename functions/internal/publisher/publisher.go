// Package publisher is the publisher Lambda's handler: it reads Maestro's
// internal events from the SQS queue the engine feeds, turns each into the
// external event (engine/event.Render) and publishes it to the events SNS
// topic, alerts to the alert topic, with PublishBatch. Message attributes
// (type, workflow_id, workflow_instance_id, step_id, status, alert_type,
// cluster_name) let subscribers filter with subscription filter policies.
// A message that failed is reported as a batch item failure, so SQS offers
// only it again and, after its redrive limit, moves it to the DLQ; each
// invocation counts them in the PublishFailures metric.
package publisher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/tracing"
)

// API is the part of the SNS client the handler uses.
type API interface {
	PublishBatch(ctx context.Context, in *sns.PublishBatchInput, opts ...func(*sns.Options)) (*sns.PublishBatchOutput, error)
}

// MaxBatch is SNS's limit of entries per PublishBatch.
const MaxBatch = 10

// Config configures a Handler.
type Config struct {
	Client API
	// EventTopicARN receives the events (MAESTRO_EVENT_TOPIC_ARN).
	EventTopicARN string
	// AlertTopicARN receives the alerts (MAESTRO_ALERT_TOPIC_ARN).
	AlertTopicARN string
	// ClusterName is the events' cluster_name (default "maestro").
	ClusterName string
	Logger      *slog.Logger
	// Metrics, when set, receives each invocation's PublishFailures (the
	// messages reported as failed, zero included, so that the alarm and
	// the dashboard see every invocation).
	Metrics *metrics.Emitter
}

// Handler publishes batches of SQS messages.
type Handler struct{ cfg Config }

// New builds a handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Client == nil || cfg.EventTopicARN == "" || cfg.AlertTopicARN == "" || cfg.Logger == nil {
		return nil, errors.New("publisher: Config.Client, EventTopicARN, AlertTopicARN and Logger are required")
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = event.DefaultClusterName
	}
	return &Handler{cfg: cfg}, nil
}

// entry is one SNS message and the SQS message it came from.
type entry struct {
	messageID string
	topic     string
	e         types.PublishBatchRequestEntry
}

// Handle publishes every message of the batch and reports the ones that
// failed.
func (h *Handler) Handle(ctx context.Context, in events.SQSEvent) (events.SQSEventResponse, error) {
	failed := map[string]bool{}
	// An empty list, never null: AWS takes both as "no failures", but an
	// event source that reads the list (ministack's) fails the whole batch
	// on null and deletes nothing.
	out := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	fail := func(id string) {
		if !failed[id] {
			failed[id] = true
			out.BatchItemFailures = append(out.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
	}
	now := time.Now()
	byTopic := map[string][]entry{}
	var topics []string
	for _, m := range in.Records {
		e, topic, err := h.entry(m.Body, now)
		if err == nil {
			traceEntry(ctx, &e, m)
		}
		if err != nil {
			h.cfg.Logger.Error("unpublishable event message; it goes to the DLQ after its retries",
				"message_id", m.MessageId, "error", err.Error())
			fail(m.MessageId)
			continue
		}
		if _, ok := byTopic[topic]; !ok {
			topics = append(topics, topic)
		}
		byTopic[topic] = append(byTopic[topic], entry{messageID: m.MessageId, topic: topic, e: e})
	}
	for _, topic := range topics {
		all := byTopic[topic]
		for i := 0; i < len(all); i += MaxBatch {
			for _, id := range h.publish(ctx, topic, all[i:min(i+MaxBatch, len(all))]) {
				fail(id)
			}
		}
	}
	if err := h.cfg.Metrics.Emit(metrics.Count(metrics.PublishFailures, float64(len(out.BatchItemFailures)))); err != nil {
		h.cfg.Logger.Warn("publish failures metric not written", "error", err.Error())
	}
	return out, nil
}

// publish sends one PublishBatch and returns the SQS message ids of the
// entries that failed.
func (h *Handler) publish(ctx context.Context, topic string, chunk []entry) []string {
	entries := make([]types.PublishBatchRequestEntry, len(chunk))
	for i, c := range chunk {
		entries[i] = c.e
		entries[i].Id = aws.String("m" + strconv.Itoa(i)) // unique in the call even for a redelivered duplicate
	}
	res, err := h.cfg.Client.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(topic), PublishBatchRequestEntries: entries})
	if err != nil {
		h.cfg.Logger.Warn("publish to SNS failed; the messages will be retried", "topic", topic, "entries", len(chunk), "error", err.Error())
		ids := make([]string, len(chunk))
		for i, c := range chunk {
			ids[i] = c.messageID
		}
		return ids
	}
	var ids []string
	for _, f := range res.Failed {
		i, convErr := strconv.Atoi(strings.TrimPrefix(aws.ToString(f.Id), "m"))
		if convErr != nil || i < 0 || i >= len(chunk) {
			continue
		}
		h.cfg.Logger.Warn("SNS refused an event; its message will be retried", "message_id", chunk[i].messageID,
			"code", aws.ToString(f.Code), "sender_fault", f.SenderFault, "error", aws.ToString(f.Message))
		ids = append(ids, chunk[i].messageID)
	}
	return ids
}

// entry turns one internal event into its SNS message and topic.
func (h *Handler) entry(body string, now time.Time) (types.PublishBatchRequestEntry, string, error) {
	msg, m, err := event.Render([]byte(body), "", h.cfg.ClusterName, now)
	if err != nil {
		return types.PublishBatchRequestEntry{}, "", err
	}
	if m.EventID == "" {
		return types.PublishBatchRequestEntry{}, "", fmt.Errorf("event without event_id")
	}
	e := types.PublishBatchRequestEntry{Message: aws.String(string(msg)), MessageAttributes: Attributes(m, h.cfg.ClusterName)}
	if m.Type != event.Alert {
		return e, h.cfg.EventTopicARN, nil
	}
	// Alerts: e-mail subscribers get a readable body and subject, the
	// others the JSON.
	structured, err := json.Marshal(map[string]string{"default": string(msg), "email": m.Text})
	if err != nil {
		return e, "", err
	}
	e.Message, e.MessageStructure, e.Subject = aws.String(string(structured)), aws.String("json"), aws.String(subject(m.Subject))
	return e, h.cfg.AlertTopicARN, nil
}

// traceEntry continues the event's trace (the record's traceparent message
// attribute, else its AWSTraceHeader) in a span of its own and gives the
// SNS message that span's traceparent, so that a subscriber sees the run's
// trace id (docs/tracing.md).
func traceEntry(ctx context.Context, e *types.PublishBatchRequestEntry, m events.SQSMessage) {
	if a, ok := m.MessageAttributes[tracing.TraceparentHeader]; ok && a.StringValue != nil {
		ctx = tracing.WithTraceparent(ctx, *a.StringValue)
	} else if h := m.Attributes["AWSTraceHeader"]; h != "" {
		ctx = tracing.WithXRayTraceHeader(ctx, h)
	}
	ctx, span := tracing.Tracer().Start(ctx, "publish event", trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	if tp := tracing.Traceparent(ctx); tp != "" {
		e.MessageAttributes[tracing.TraceparentHeader] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(tp)}
	}
}

// Attributes are an event's SNS message attributes (event.Meta.Attributes).
func Attributes(m event.Meta, cluster string) map[string]types.MessageAttributeValue {
	attrs := m.Attributes(cluster)
	out := make(map[string]types.MessageAttributeValue, len(attrs))
	for name, a := range attrs {
		out[name] = types.MessageAttributeValue{DataType: aws.String(a.DataType), StringValue: aws.String(a.Value)}
	}
	return out
}

// subject fits an e-mail subject to SNS's rules: printable ASCII, under
// 100 characters.
func subject(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 0x20 && r < 0x7f {
			b.WriteRune(r)
		} else {
			b.WriteByte('?')
		}
		if b.Len() >= 99 {
			break
		}
	}
	return b.String()
}
