package publisher_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/functions/internal/publisher"
)

// takeSNS is an in-memory PublishBatch that keeps what it was given.
type takeSNS struct{ in []*sns.PublishBatchInput }

func (f *takeSNS) PublishBatch(_ context.Context, in *sns.PublishBatchInput, _ ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	f.in = append(f.in, in)
	return &sns.PublishBatchOutput{}, nil
}

// The publisher continues each record's trace on its SNS message: the
// traceparent message attribute when the record has one, else the X-Ray
// AWSTraceHeader (what SQS keeps for a message sent with it, and what a
// producer that speaks only X-Ray sets); a record with neither gets none.
func TestPublisherContinuesTheRecordsTrace(t *testing.T) {
	f := &takeSNS{}
	h, err := publisher.New(publisher.Config{Client: f, EventTopicARN: "arn:events", AlertTopicARN: "arn:alerts", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	body := func(id string) string {
		b, _ := json.Marshal(event.WorkflowChangeEvent{EventID: id, WorkflowID: "wf", Author: "a", Type: event.WorkflowPropertiesChange, EventTime: 1})
		return string(b)
	}
	tp := func(v string) map[string]events.SQSMessageAttribute {
		return map[string]events.SQSMessageAttribute{tracing.TraceparentHeader: {DataType: "String", StringValue: aws.String(v)}}
	}
	in := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "xray", Body: body("1-1"),
			Attributes: map[string]string{"AWSTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"}},
		{MessageId: "w3c", Body: body("1-2"), MessageAttributes: tp("00-5759e988bd862e3fe1be46a994272794-53995c3f42cd8ad8-01"),
			Attributes: map[string]string{"AWSTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994279999;Parent=53995c3f42cd8ad8;Sampled=1"}},
		{MessageId: "none", Body: body("1-3")},
	}}
	out, err := h.Handle(context.Background(), in)
	if err != nil || len(out.BatchItemFailures) != 0 {
		t.Fatalf("handle: %v %v", out.BatchItemFailures, err)
	}
	if len(f.in) != 1 || len(f.in[0].PublishBatchRequestEntries) != 3 {
		t.Fatalf("published %+v, want one batch of 3", f.in)
	}
	want := []string{"5759e988bd862e3fe1be46a994272793", "5759e988bd862e3fe1be46a994272794", ""}
	for i, e := range f.in[0].PublishBatchRequestEntries {
		a, ok := e.MessageAttributes[tracing.TraceparentHeader]
		got := ""
		if ok {
			got = aws.ToString(a.StringValue)
			if len(got) != 55 || aws.ToString(a.DataType) != "String" {
				t.Errorf("entry %d: traceparent %q (%s)", i, got, aws.ToString(a.DataType))
				continue
			}
			got = got[3:35]
		}
		if got != want[i] {
			t.Errorf("entry %d (%s): trace %q, want %q", i, in.Records[i].MessageId, got, want[i])
		}
	}
}
