package e2e_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// signalBucket is the bucket the deployment lets notify the signals queue
// (maestro:s3SignalBuckets); signalRules is the signals function's
// MAESTRO_S3_SIGNAL_RULES (maestro:s3SignalRules): an object under
// landing/{table}/dt={dt}/ announces landing.{table} with the key's table
// and dt, and the object's bucket, key, size and etag, as params.
const (
	signalBucket = "maestro-e2e-landing"
	signalRules  = `[{"bucket":"` + signalBucket + `","prefix":"landing/","key_pattern":"landing/{table}/dt={dt}/{file}","signal":"landing.{table}"}]`
)

// scenarioSignals: the operator points the bucket's event notifications at
// the signals queue (the stack's SignalsQueueArn output; its policy admits
// the bucket); an object put into the bucket becomes an S3 notification
// in the queue, the queue's event source invokes the signals Lambda, which
// maps it by the deployed rules to a signal, and the signal starts a run of
// a workflow with a signal trigger on it, whose step reads the signal's
// params. Then a batch of two messages, one that can never parse and one
// Maestro signal: the signal starts a second run at once (the poison
// message is a batch item failure, not a failed batch), and the poison
// message reaches the dead-letter queue after the queue's max receive
// count.
func scenarioSignals(t *testing.T, d *Deployment) {
	ctx := context.Background()
	id := uniqueID("signal")
	name := "landing." + id
	d.push(t, map[string]any{"workflow": map[string]any{
		"id":              id,
		"signal_triggers": []any{map[string]any{"definitions": map[string]any{name: map[string]any{}}}},
		"steps": []any{map[string]any{"step": map[string]any{"id": "load", "type": "NoOp",
			"params": map[string]any{
				"dt":  map[string]any{"type": "STRING", "expression": "params.getFromSignal('" + name + "', 'dt')"},
				"key": map[string]any{"type": "STRING", "expression": "params.getFromSignal('" + name + "', 'key')"},
			}}}},
	}})

	s := s3.NewFromConfig(d.AWS, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(signalBucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	if _, err := s.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
		Bucket: aws.String(signalBucket),
		NotificationConfiguration: &s3types.NotificationConfiguration{QueueConfigurations: []s3types.QueueConfiguration{{
			QueueArn: aws.String(d.Output(t, stackSignals, "SignalsQueueArn")),
			Events:   []s3types.Event{s3types.EventS3ObjectCreated},
		}}},
	}); err != nil {
		t.Fatalf("bucket notification to the signals queue: %v", err)
	}
	key := "landing/" + id + "/dt=2026-05-01/part-0.parquet"
	if _, err := s.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(signalBucket), Key: aws.String(key),
		Body: strings.NewReader("rows")}); err != nil {
		t.Fatalf("put object: %v", err)
	}
	put := time.Now()

	if run := d.waitForRun(t, id, "SUCCEEDED", 2*time.Minute); run.InitiatorType != "SIGNAL" {
		t.Errorf("initiator %q, want SIGNAL (started by the signal trigger)", run.InitiatorType)
	}
	t.Logf("the object's run succeeded %s after the put", time.Since(put).Round(time.Second))
	code, body := d.CallAPI(t, "GET", "/api/v3/workflows/"+id+"/instances/1/runs/1/steps", nil)
	if steps := readSteps(body); code != 200 || len(steps) != 1 || steps[0].Params["dt"] != "2026-05-01" || steps[0].Params["key"] != key {
		t.Errorf("step load should read dt 2026-05-01 and key %s from the signal: %d %v", key, code, body)
	}
	code, body = d.CallAPI(t, "GET", "/api/v3/workflows/"+id+"/instances/1/runs/1/signals", nil)
	started := readLineage(body)
	if code != 200 || len(started) != 1 || started[0].Relation != "STARTED" || started[0].Name != name {
		t.Fatalf("lineage of the run: %d %v", code, body)
	}
	code, body = d.CallAPI(t, "GET", "/api/v3/signals/"+url.PathEscape(name)+"/instances/"+strconv.FormatInt(started[0].Seq, 10), nil)
	if p, _ := body["params"].(map[string]any); code != 200 || p["bucket"] != signalBucket || p["key"] != key || p["size"] != float64(4) {
		t.Errorf("the signal instance: %d %v", code, body)
	}

	// A poison message beside a good one, in one batch.
	q := sqs.NewFromConfig(d.AWS)
	queueURL := d.Output(t, stackSignals, "SignalsQueueUrl")
	// The deployed queue hides a received message for six times the
	// function's timeout (over six minutes) before it is received again;
	// shortened here so the poison message's five receives fit the test.
	if _, err := q.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		Attributes: map[string]string{string(sqstypes.QueueAttributeNameVisibilityTimeout): "3"}}); err != nil {
		t.Fatal(err)
	}
	poison := "poison " + id + ": not a signal {"
	if out, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL),
		Entries: []sqstypes.SendMessageBatchRequestEntry{
			{Id: aws.String("poison"), MessageBody: aws.String(poison)},
			{Id: aws.String("good"), MessageBody: aws.String(fmt.Sprintf(
				`{"name": %q, "params": {"dt": "2026-05-02", "key": "by-hand"}, "request_id": "e2e-%s"}`, name, id))},
		}}); err != nil || len(out.Failed) != 0 {
		t.Fatalf("send the batch: %v %+v", err, out)
	}
	sent := time.Now()
	d.waitForInstance(t, id, 2, "SUCCEEDED", 2*time.Minute)
	t.Logf("the good message's run succeeded %s after the batch was sent", time.Since(sent).Round(time.Second))

	dlq := deadLetterQueue(t, q, queueURL)
	var inDLQ []string
	waitFor(t, "the poison message in the signals dead-letter queue", 3*time.Minute, func() (bool, string) {
		res, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlq), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Messages {
			inDLQ = append(inDLQ, aws.ToString(m.Body))
			if aws.ToString(m.Body) == poison {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%q", inDLQ)
	})
	t.Logf("the poison message reached the dead-letter queue %s after it was sent", time.Since(sent).Round(time.Second))
	// Every other message was deleted once handled: the queue drains.
	waitFor(t, "the signals queue empty", time.Minute, func() (bool, string) {
		attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			t.Fatal(err)
		}
		visible := attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]
		hidden := attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]
		return visible == "0" && hidden == "0", fmt.Sprintf("%s visible, %s in flight", visible, hidden)
	})
	// The good message was not retried into a third run.
	if code, body := d.CallAPI(t, "GET", "/api/v3/workflows/"+id+"/instances/3", nil); code != 404 {
		t.Errorf("a third run: %d %v", code, body)
	}
}
