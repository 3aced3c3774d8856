package publisher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/alert"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/event/sqssink"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/functions/internal/publisher"
	"github.com/maestro-aws/maestro/localstack"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// awsEnv is a queue of internal events, the two topics, and subscriber
// queues with filter policies, in the emulator.
type awsEnv struct {
	t        *testing.T
	sqs      *sqs.Client
	sns      *sns.Client
	internal string
	events   string
	alerts   string
}

func newAWSEnv(t *testing.T) *awsEnv {
	t.Helper()
	cfg := localstack.Config(t)
	a := &awsEnv{t: t, sqs: sqs.NewFromConfig(cfg), sns: sns.NewFromConfig(cfg)}
	a.internal = a.queue("maestro-internal-events")
	a.events = a.topic("maestro-events")
	a.alerts = a.topic("maestro-alerts")
	return a
}

func suffix() string { return strings.ReplaceAll(uuid.NewString()[:8], "-", "") }

func (a *awsEnv) queue(name string) string {
	a.t.Helper()
	out, err := a.sqs.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name + "-" + suffix())})
	if err != nil {
		a.t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

func (a *awsEnv) topic(name string) string {
	a.t.Helper()
	out, err := a.sns.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String(name + "-" + suffix())})
	if err != nil {
		a.t.Fatal(err)
	}
	return aws.ToString(out.TopicArn)
}

// subscribe makes a queue that receives the topic's messages its filter
// policy lets through (raw delivery: the body is the event).
func (a *awsEnv) subscribe(topic, name, policy string) string {
	a.t.Helper()
	ctx := context.Background()
	q := a.queue(name)
	attrs, err := a.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		a.t.Fatal(err)
	}
	subAttrs := map[string]string{"RawMessageDelivery": "true"}
	if policy != "" {
		subAttrs["FilterPolicy"] = policy
	}
	if _, err := a.sns.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(topic), Protocol: aws.String("sqs"),
		Endpoint: aws.String(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]), Attributes: subAttrs}); err != nil {
		a.t.Fatal(err)
	}
	return q
}

// drain receives (and deletes) the messages a queue holds now.
func (a *awsEnv) drain(q string) []sqstypes.Message {
	a.t.Helper()
	ctx := context.Background()
	var out []sqstypes.Message
	for {
		res, err := a.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 0, MessageAttributeNames: []string{"All"}})
		if err != nil {
			a.t.Fatal(err)
		}
		if len(res.Messages) == 0 {
			return out
		}
		out = append(out, res.Messages...)
		for _, m := range res.Messages {
			if _, err := a.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: m.ReceiptHandle}); err != nil {
				a.t.Fatal(err)
			}
		}
	}
}

// publish is the publisher Lambda's event source mapping: it hands the
// internal queue's messages to the handler in batches of ten and deletes
// those not reported as failures. Like Lambda's, it gives the handler each
// message's attributes (messageAttributes, and the AWSTraceHeader system
// attribute under attributes), which carry the run's trace.
func (a *awsEnv) publish(h *publisher.Handler) (published int) {
	a.t.Helper()
	ctx := context.Background()
	for {
		res, err := a.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(a.internal), MaxNumberOfMessages: 10,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAWSTraceHeader},
			MessageAttributeNames:       []string{"All"}})
		if err != nil {
			a.t.Fatal(err)
		}
		if len(res.Messages) == 0 {
			return published
		}
		in := events.SQSEvent{}
		for _, m := range res.Messages {
			in.Records = append(in.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), Body: aws.ToString(m.Body),
				ReceiptHandle: aws.ToString(m.ReceiptHandle), EventSource: "aws:sqs", Attributes: m.Attributes,
				MessageAttributes: lambdaAttributes(m.MessageAttributes)})
		}
		out, err := h.Handle(ctx, in)
		if err != nil {
			a.t.Fatal(err)
		}
		if len(out.BatchItemFailures) > 0 {
			a.t.Fatalf("publisher reported failures: %+v", out.BatchItemFailures)
		}
		// No failures is an empty list, not null (ministack's event source
		// fails a batch answered with null).
		if b, _ := json.Marshal(out); string(b) != `{"batchItemFailures":[]}` {
			a.t.Errorf("response %s, want an empty batchItemFailures list", b)
		}
		for _, m := range res.Messages {
			if _, err := a.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(a.internal), ReceiptHandle: m.ReceiptHandle}); err != nil {
				a.t.Fatal(err)
			}
		}
		published += len(res.Messages)
	}
}

// lambdaAttributes are SQS message attributes as Lambda's SQS event
// source hands them to a function.
func lambdaAttributes(in map[string]sqstypes.MessageAttributeValue) map[string]events.SQSMessageAttribute {
	out := map[string]events.SQSMessageAttribute{}
	for k, v := range in {
		out[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	return out
}

// The AWS path end to end, with the real clients against the emulator: the
// engine's forwarder hands the outbox to SQS with SendMessageBatch; the
// publisher handler publishes each event to the SNS topic with message
// attributes (alerts to the alert topic); SNS -> SQS subscriptions with
// filter policies receive exactly the events they asked for.
func TestPublisherThroughSQSAndSNS(t *testing.T) {
	a := newAWSEnv(t)
	everything := a.subscribe(a.events, "all", "")
	failedRuns := a.subscribe(a.events, "failed-runs",
		`{"type":["WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT"],"status":["FAILED"]}`)
	orderSteps := a.subscribe(a.events, "order-steps",
		`{"workflow_id":["orders"],"type":["STEP_INSTANCE_STATUS_CHANGE_EVENT"],"status":["SUCCEEDED"]}`)
	stepFailures := a.subscribe(a.alerts, "step-failures", `{"alert_type":["STEP_FAILURE"]}`)

	ctx := context.Background()
	e := flowtest.New(t)
	pool := e.Pool
	e.Engine(nil, flow.Config{})
	sink, err := sqssink.New(sqssink.Config{Client: a.sqs, QueueURL: a.internal, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := event.NewForwarder(pool, event.ForwarderConfig{Name: "sqs", Sink: sink, Logger: quiet(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := fwd.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fwd.Stop)
	alerts, err := alert.New(pool, alert.Config{Logger: quiet(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := alerts.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(alerts.Stop)

	e.PushAs(`{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"orders","steps":[
		{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"}}}},{"step":{"id":"b","type":"NoOp"}}]}}`, "tester")

	e.PushAs(`{"properties":{"owner":"tester","alerting":{"emails":["oncall@example.com"]}},"workflow":{"id":"broken","steps":[
		{"step":{"id":"x","type":"Fail","retry_policy":{"error_retry_limit":0}}}]}}`, "tester")

	// Each run starts in a trace of its own (as an API request's would):
	// its events reach the subscribers with that trace id.
	traceOf := map[string]string{}
	for i, wf := range []string{"orders", "orders", "orders", "broken"} {
		tp := fmt.Sprintf("00-5759e988bd862e3fe1be46a9942727%02x-%016x-01", i+1, i+1)
		res, err := e.Runs.Start(tracing.WithTraceparent(ctx, tp), execution.StartRequest{WorkflowID: wf, Version: "latest"})
		if err != nil {
			t.Fatal(err)
		}
		traceOf[fmt.Sprint(wf, res.Instance.InstanceID)] = tp[3:35]
		e.Wait(res.Instance, time.Minute)
	}

	h, err := publisher.New(publisher.Config{Client: a.sns, EventTopicARN: a.events, AlertTopicARN: a.alerts,
		ClusterName: "emulated", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var outbox int
	// Every event written (the alert included) goes through the queue and
	// the publisher.
	published := 0
	deadline := time.Now().Add(time.Minute)
	for {
		published += a.publish(h)
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM maestro_event`).Scan(&outbox); err != nil {
			t.Fatal(err)
		}
		var alerted bool
		_ = pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM maestro_event WHERE kind = 9)`).Scan(&alerted)
		if alerted && published >= outbox {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("published %d of %d events", published, outbox)
		}
		time.Sleep(50 * time.Millisecond)
	}

	type received struct {
		ids    []string
		events []map[string]any
		attrs  []map[string]sqstypes.MessageAttributeValue
	}
	collect := func(q string, want int) received {
		t.Helper()
		var r received
		seen := map[string]bool{}
		deadline := time.Now().Add(30 * time.Second)
		for {
			for _, m := range a.drain(q) {
				var ev map[string]any
				if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
					t.Fatalf("subscriber got %s: %v", aws.ToString(m.Body), err)
				}
				id, _ := ev["event_id"].(string)
				if seen[id] {
					continue
				}
				seen[id] = true
				r.ids = append(r.ids, id)
				r.events = append(r.events, ev)
				r.attrs = append(r.attrs, m.MessageAttributes)
			}
			if len(r.ids) >= want || time.Now().After(deadline) {
				time.Sleep(200 * time.Millisecond) // anything more would be one too many
				for _, m := range a.drain(q) {
					// A repeat is SQS's at-least-once delivery (a message
					// redelivered to the publisher on a slow machine): the
					// event id tells consumers, and the test, it is one.
					var ev map[string]any
					_ = json.Unmarshal([]byte(aws.ToString(m.Body)), &ev)
					if id, _ := ev["event_id"].(string); seen[id] {
						continue
					}
					t.Errorf("unexpected extra message: %s", aws.ToString(m.Body))
				}
				return r
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	all := collect(everything, outbox-1) // all but the alert
	if len(all.ids) != outbox-1 {
		t.Errorf("the unfiltered subscription got %d events, want %d", len(all.ids), outbox-1)
	}
	for i, ev := range all.events {
		if ev["cluster_name"] != "emulated" || ev["type"] == "ALERT" {
			t.Errorf("event %v", ev)
		}
		if ty := all.attrs[i]["type"]; ty.StringValue == nil || *ty.StringValue != ev["type"] {
			t.Errorf("message attribute type %v for a %v event", ty.StringValue, ev["type"])
		}
		if id, ok := ev["workflow_instance_id"].(float64); ok && id > 0 {
			want := traceOf[fmt.Sprint(ev["workflow_id"], int64(id))]
			tp := all.attrs[i][tracing.TraceparentHeader].StringValue
			if want == "" || tp == nil || len(*tp) < 35 || (*tp)[3:35] != want {
				t.Errorf("%v event of run %v/%v: traceparent %v, want trace %s", ev["type"], ev["workflow_id"], id, tp, want)
			}
		}
	}
	failed := collect(failedRuns, 1)
	if len(failed.events) != 1 || failed.events[0]["workflow_id"] != "broken" || failed.events[0]["new_status"] != "FAILED" {
		t.Errorf("the failed-runs subscription got %v", failed.events)
	}
	steps := collect(orderSteps, 6) // three runs, two steps, each ending SUCCEEDED
	for _, ev := range steps.events {
		recs, _ := ev["status_change_records"].([]any)
		last, _ := recs[len(recs)-1].(map[string]any)
		if ev["workflow_id"] != "orders" || last["new_status"] != "SUCCEEDED" {
			t.Errorf("the order-steps subscription got %v", ev)
		}
	}
	if len(steps.events) != 6 {
		t.Errorf("the order-steps subscription got %d events, want 6", len(steps.events))
	}
	alertsGot := collect(stepFailures, 1)
	if len(alertsGot.events) != 1 || alertsGot.events[0]["alert_type"] != "STEP_FAILURE" || alertsGot.events[0]["workflow_id"] != "broken" {
		t.Errorf("the step-failures subscription got %v", alertsGot.events)
	}
}

// The handler reports, per message, what it could not publish: a malformed
// message (it goes to the DLQ after its retries) and the messages of a
// topic that refuses them, while the others are published.
func TestPublisherReportsPartialFailures(t *testing.T) {
	a := newAWSEnv(t)
	sub := a.subscribe(a.events, "all", "")
	var emf bytes.Buffer
	h, err := publisher.New(publisher.Config{Client: a.sns, EventTopicARN: a.events,
		AlertTopicARN: strings.Replace(a.alerts, "maestro-alerts", "no-such-topic", 1), Logger: quiet(),
		Metrics: metrics.New(&emf, metrics.ServicePublisher)})
	if err != nil {
		t.Fatal(err)
	}
	good := func(i int) string {
		b, _ := json.Marshal(event.WorkflowChangeEvent{EventID: fmt.Sprintf("9-%d", i), WorkflowID: "wf", Author: "a",
			Type: event.WorkflowPropertiesChange, EventTime: 1})
		return string(b)
	}
	alertBody, _ := json.Marshal(event.AlertEvent{EventID: "9-99", AlertType: "STEP_FAILURE", WorkflowID: "wf", Reason: "r", Type: event.Alert})
	in := events.SQSEvent{}
	for i := range 12 {
		in.Records = append(in.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i), Body: good(i)})
	}
	in.Records = append(in.Records,
		events.SQSMessage{MessageId: "bad", Body: `{"type":"NOT_AN_EVENT"}`},
		events.SQSMessage{MessageId: "alert", Body: string(alertBody)},
		events.SQSMessage{MessageId: "no-id", Body: `{"workflow_id":"wf","type":"WORKFLOW_PROPERTIES_CHANGE_EVENT"}`})
	out, err := h.Handle(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range out.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	slices.Sort(failed)
	if !slices.Equal(failed, []string{"alert", "bad", "no-id"}) {
		t.Errorf("batch item failures %v, want the malformed, the id-less and the unpublishable messages", failed)
	}
	// The invocation counted them in PublishFailures, under the dimension
	// the dashboard and the alarm read.
	data, err := metrics.Parse(emf.Bytes())
	want := []metrics.Datum{{Namespace: metrics.Namespace, Name: metrics.PublishFailures, Unit: metrics.UnitCount,
		Dimensions: map[string]string{metrics.DimensionService: metrics.ServicePublisher}, Values: []float64{3}}}
	if err != nil || !reflect.DeepEqual(data, want) {
		t.Errorf("metrics %s: %+v (%v), want %+v", emf.String(), data, err, want)
	}
	// Counted by event id: SNS and SQS are at least once, and a PublishBatch
	// the SDK retried after a broken connection (the emulator had
	// published it) arrives twice.
	eventID := regexp.MustCompile(`event_id\\?":\\?"(9-\d+)`)
	got := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 12 && time.Now().Before(deadline) {
		for _, m := range a.drain(sub) {
			if id := eventID.FindStringSubmatch(aws.ToString(m.Body)); id != nil {
				got[id[1]] = true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(got) != 12 {
		t.Errorf("the subscription got %d of the 12 good events: %v", len(got), got)
	}
}
