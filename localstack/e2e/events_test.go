package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/metrics"
)

// delivered is one event a queue received from the event topic (raw
// delivery: the body is the event, the SNS message attributes are the SQS
// message attributes).
type delivered struct {
	body []byte
	head struct {
		Type        event.Type `json:"type"`
		WorkflowID  string     `json:"workflow_id"`
		ClusterName string     `json:"cluster_name"`
	}
	attrs map[string]sqstypes.MessageAttributeValue
}

// attr is the value of a message attribute and its data type.
func (m delivered) attr(name string) (value, dataType string) {
	a, ok := m.attrs[name]
	if !ok {
		return "", ""
	}
	return aws.ToString(a.StringValue), aws.ToString(a.DataType)
}

// receiveAll receives and deletes what the queue holds now.
func receiveAll(t *testing.T, q *sqs.Client, url string) []delivered {
	t.Helper()
	var out []delivered
	for {
		res, err := q.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url),
			MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatalf("receive from %s: %v", url, err)
		}
		if len(res.Messages) == 0 {
			return out
		}
		for _, m := range res.Messages {
			d := delivered{body: []byte(aws.ToString(m.Body)), attrs: m.MessageAttributes}
			if err := json.Unmarshal(d.body, &d.head); err != nil {
				t.Errorf("%s received %s, not an event: %v", url, d.body, err)
			}
			out = append(out, d)
			if _, err := q.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url),
				ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// probeQueue subscribes a queue of the test's own to the event topic with
// no filter policy: it sees every event the publisher published.
func probeQueue(t *testing.T, d *Deployment) string {
	t.Helper()
	ctx := context.Background()
	q, n := sqs.NewFromConfig(d.AWS), sns.NewFromConfig(d.AWS)
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("e2e-probe-%d", time.Now().UnixNano()))})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: created.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	topic, queueARN := d.Output(t, stackEvents, "EventTopicArn"), attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	// As on AWS, SNS delivers to a queue only when the queue's policy lets
	// the topic send (the emulator evaluates it, AUTH=true).
	policy, err := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Effect": "Allow", "Principal": map[string]any{"Service": "sns.amazonaws.com"}, "Action": "sqs:SendMessage",
		"Resource": queueARN, "Condition": map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": topic}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: created.QueueUrl,
		Attributes: map[string]string{string(sqstypes.QueueAttributeNamePolicy): string(policy)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(topic),
		Protocol: aws.String("sqs"), Endpoint: aws.String(queueARN),
		Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		t.Fatal(err)
	}
	return aws.ToString(created.QueueUrl)
}

// scenarioPublisher: the engine's forwarder sends a run's internal events
// to the internal-events queue (MAESTRO_EVENT_QUEUE_URL from the engine
// stack), the queue's event source invokes the publisher Lambda, which
// publishes them to the SNS event topic with message attributes, and the
// stack's example subscriber queue receives the run's instance status
// events, with their attributes. Its filter policy really filters: the
// run's step events reach the topic (an unfiltered probe subscription gets
// them) but never the example subscriber. The publisher wrote its
// PublishFailures (zero) under the name and dimension the deployed alarm
// reads, and nothing went to the dead-letter queue.
func scenarioPublisher(t *testing.T, d *Deployment) {
	q := sqs.NewFromConfig(d.AWS)
	probe := probeQueue(t, d)
	subscriber := d.Output(t, stackEvents, "ExampleSubscriberQueueUrl")

	id := uniqueID("events")
	d.push(t, twoSteps(id, nil))
	d.start(t, id)
	d.waitForRun(t, id, "SUCCEEDED", 2*time.Minute)

	// The scenarios run together: the subscriber queue holds other runs'
	// events too, so everything is checked, this run's in detail.
	var got, probed []delivered
	mine := func(list []delivered, typ event.Type) []delivered {
		var out []delivered
		for _, m := range list {
			if m.head.WorkflowID == id && m.head.Type == typ {
				out = append(out, m)
			}
		}
		return out
	}
	succeeded := func() bool {
		for _, m := range mine(got, event.WorkflowInstanceStatusChange) {
			var ev event.WorkflowInstanceStatusChangeEvent
			if json.Unmarshal(m.body, &ev) == nil && ev.NewStatus == "SUCCEEDED" {
				return true
			}
		}
		return false
	}
	waitFor(t, "the example subscriber receives the run's SUCCEEDED event, and the probe its step events", 2*time.Minute, func() (bool, string) {
		got = append(got, receiveAll(t, q, subscriber)...)
		probed = append(probed, receiveAll(t, q, probe)...)
		steps := len(mine(probed, event.StepInstanceStatusChange))
		return succeeded() && steps > 0, fmt.Sprintf("subscriber %d messages, probe %d (%d step events of the run)", len(got), len(probed), steps)
	})
	// The emulator's SNS delivers a message to every subscription within
	// the publish call: a step event the probe holds has been offered to
	// the example subscriber too, so one more receive sees any the filter
	// let through.
	got = append(got, receiveAll(t, q, subscriber)...)

	for _, m := range got {
		typ, dataType := m.attr(event.AttributeType)
		if m.head.Type != event.WorkflowInstanceStatusChange || typ != string(m.head.Type) || dataType != "String" {
			t.Errorf("the example subscriber received a %s event (type attribute %q %s); its filter lets only %s through",
				m.head.Type, typ, dataType, event.WorkflowInstanceStatusChange)
		}
	}
	var statuses []string
	for _, m := range mine(got, event.WorkflowInstanceStatusChange) {
		var ev event.WorkflowInstanceStatusChangeEvent
		if err := json.Unmarshal(m.body, &ev); err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, string(ev.NewStatus))
		want := map[string][2]string{
			event.AttributeType:        {string(event.WorkflowInstanceStatusChange), "String"},
			event.AttributeWorkflowID:  {id, "String"},
			event.AttributeClusterName: {"maestro", "String"},
			event.AttributeInstanceID:  {"1", "Number"},
			event.AttributeStatus:      {`["` + string(ev.NewStatus) + `"]`, "String.Array"},
		}
		for name, w := range want {
			if v, dt := m.attr(name); v != w[0] || dt != w[1] {
				t.Errorf("%s event: attribute %s = %q (%s), want %q (%s)", ev.NewStatus, name, v, dt, w[0], w[1])
			}
		}
		if ev.ClusterName != "maestro" || ev.WorkflowInstanceID != 1 || ev.EventID == "" {
			t.Errorf("event %s", m.body)
		}
	}
	if !slices.Contains(statuses, "IN_PROGRESS") || !slices.Contains(statuses, "SUCCEEDED") {
		t.Errorf("the run's status events %v, want IN_PROGRESS and SUCCEEDED", statuses)
	}
	if n := len(mine(probed, event.StepInstanceStatusChange)); n == 0 {
		t.Error("the publisher published none of the run's step events")
	}
	t.Logf("the example subscriber received %d events (the run's statuses %v); the unfiltered probe %d, %d of them the run's step events",
		len(got), statuses, len(probed), len(mine(probed, event.StepInstanceStatusChange)))

	failures := d.emitted(t, stackEvents, "Publisher", metrics.PublishFailures, time.Minute)
	for _, m := range failures {
		if m.Unit != metrics.UnitCount || len(m.Values) != 1 || m.Values[0] != 0 {
			t.Errorf("PublishFailures %+v, want 0 per invocation", m)
		}
	}
	d.alarmedAs(t, failures[0])

	dlq, err := q.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(deadLetterQueue(t, q, d.Output(t, stackEvents, "InternalEventsQueueUrl"))),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	if n := dlq.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]; n != "0" {
		t.Errorf("%s messages in the internal-events dead-letter queue", n)
	}
}

// deadLetterQueue is the URL of the dead-letter queue of the queue at url
// (its redrive policy).
func deadLetterQueue(t *testing.T, q *sqs.Client, url string) string {
	t.Helper()
	ctx := context.Background()
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		t.Fatal(err)
	}
	var policy struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	}
	raw := attrs.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)]
	if err := json.Unmarshal([]byte(raw), &policy); err != nil || policy.DeadLetterTargetArn == "" {
		t.Fatalf("%s has no redrive policy: %q (%v)", url, raw, err)
	}
	name := policy.DeadLetterTargetArn[strings.LastIndex(policy.DeadLetterTargetArn, ":")+1:]
	out, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("dead-letter queue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}
