package sqssink_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/event/sqssink"
)

// fakeSQS is an in-memory SendMessageBatch for the sink's own logic:
// per-body scripted failures, and what was taken.
type fakeSQS struct {
	mu       sync.Mutex
	calls    int
	maxBatch int
	taken    []string
	entries  []types.SendMessageBatchRequestEntry
	// transient fails a body this many times; permanent always, as the
	// sender's fault; down fails whole calls this many times.
	transient map[string]int
	permanent map[string]bool
	down      int
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.maxBatch = max(f.maxBatch, len(in.Entries))
	f.entries = append(f.entries, in.Entries...)
	if f.down > 0 {
		f.down--
		return nil, errors.New("service unavailable")
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		body := aws.ToString(e.MessageBody)
		switch {
		case f.permanent[body]:
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, SenderFault: true, Code: aws.String("InvalidMessageContents")})
		case f.transient[body] > 0:
			f.transient[body]--
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError")})
		default:
			f.taken = append(f.taken, body)
		}
	}
	return out, nil
}

func events(n int) []event.Event {
	out := make([]event.Event, n)
	for i := range out {
		rec := event.NewRecord(&event.WorkflowChangeEvent{Type: event.WorkflowPropertiesChange, WorkflowID: fmt.Sprintf("wf%d", i), Author: "a"})
		out[i] = event.Event{Position: event.Position{TX: 10, ID: int64(i + 1)}, Kind: rec.Kind, WorkflowID: rec.WorkflowID, Payload: rec.Payload}
	}
	return out
}

func bodyOf(e event.Event) string { return string(event.Wire(e)) }

// The sink sends ten entries a call, retries the entries SQS failed, skips
// for good an entry SQS refuses as malformed, and when the forwarder
// offers a failed batch again sends only what SQS did not take.
func TestSinkRetriesPerEntry(t *testing.T) {
	evs := events(25)
	f := &fakeSQS{transient: map[string]int{bodyOf(evs[3]): 2, bodyOf(evs[17]): 1}, permanent: map[string]bool{bodyOf(evs[20]): true}}
	s, err := sqssink.New(sqssink.Config{Client: f, QueueURL: "q", Concurrency: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	if f.maxBatch != sqssink.MaxBatch || len(f.taken) != 24 {
		t.Errorf("largest call %d entries, %d taken; want %d and 24", f.maxBatch, len(f.taken), sqssink.MaxBatch)
	}
	for _, b := range f.taken {
		if !strings.HasPrefix(b, `{"event_id":"10-`) {
			t.Fatalf("message body %s does not start with its event_id", b)
		}
	}

	// SQS down for longer than the sink's attempts: the batch fails, and
	// offered again, only the rest is sent.
	f2 := &fakeSQS{down: 5, transient: map[string]int{bodyOf(evs[0]): 10}}
	s2, _ := sqssink.New(sqssink.Config{Client: f2, QueueURL: "q", Concurrency: 1, Attempts: 3, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s2.Publish(context.Background(), evs[:12]); err == nil {
		t.Fatal("a batch SQS never took was reported published")
	}
	for s2.Publish(context.Background(), evs[:12]) != nil {
	}
	seen := map[string]int{}
	for _, b := range f2.taken {
		seen[b]++
	}
	for _, e := range evs[:12] {
		if seen[bodyOf(e)] != 1 {
			t.Errorf("event %s taken %d times", e.EventID(), seen[bodyOf(e)])
		}
	}
}

// An event of a traced run goes to SQS with the run's trace twice: the
// traceparent message attribute (what Lambda hands the publisher) and the
// AWSTraceHeader system attribute in X-Ray's form; an untraced one with
// neither.
func TestSinkCarriesTheRunsTrace(t *testing.T) {
	evs := events(2)
	evs[0].TraceContext = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
	f := &fakeSQS{}
	s, err := sqssink.New(sqssink.Config{Client: f, QueueURL: "q", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	if len(f.entries) != 2 {
		t.Fatalf("%d entries sent, want 2", len(f.entries))
	}
	traced, untraced := f.entries[0], f.entries[1]
	if tp := traced.MessageAttributes["traceparent"]; aws.ToString(tp.StringValue) != evs[0].TraceContext || aws.ToString(tp.DataType) != "String" {
		t.Errorf("traceparent attribute %+v, want %s", tp, evs[0].TraceContext)
	}
	want := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	if h := traced.MessageSystemAttributes["AWSTraceHeader"]; aws.ToString(h.StringValue) != want {
		t.Errorf("AWSTraceHeader %q, want %q", aws.ToString(h.StringValue), want)
	}
	if len(untraced.MessageAttributes) != 0 || len(untraced.MessageSystemAttributes) != 0 {
		t.Errorf("an untraced event was sent with %v %v", untraced.MessageAttributes, untraced.MessageSystemAttributes)
	}
}
