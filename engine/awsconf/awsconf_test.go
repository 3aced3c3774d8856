package awsconf

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// A recorded client writes one line per call, with the service's error
// code when it refused; without MAESTRO_AWS_CALL_LOG nothing is recorded.
func TestLoadRecordsCallsWhenAsked(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == "AmazonSQS.SendMessage" {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Header().Set("x-amzn-query-error", "AccessDenied;Sender")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"__type":"com.amazon.coral.service#AccessDeniedException","message":"no"}`))
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"QueueUrl":"http://q"}`))
	}))
	defer srv.Close()
	log := filepath.Join(t.TempDir(), "calls.jsonl")
	opts := []func(*config.LoadOptions) error{config.WithRegion("us-east-1"), config.WithBaseEndpoint(srv.URL),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("a", "b", "")),
		config.WithRetryMaxAttempts(1)}

	t.Setenv(CallLogEnv, "")
	cfg, err := Load(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqs.NewFromConfig(cfg).GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("q")}); err != nil {
		t.Fatal(err)
	}

	t.Setenv(CallLogEnv, log)
	t.Setenv(PrincipalEnv, "engine")
	cfg, err = Load(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg)
	if _, err := client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("q")}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String("http://q"), MessageBody: aws.String("x")}); err == nil {
		t.Fatal("SendMessage succeeded against a server that refuses it")
	}
	// sfn sets the call's names as stack values only inside the stack.
	if _, err := sfn.NewFromConfig(cfg).DescribeExecution(context.Background(), &sfn.DescribeExecutionInput{ExecutionArn: aws.String("arn")}); err != nil {
		t.Fatal(err)
	}
	calls, err := ReadCalls(log)
	if err != nil {
		t.Fatal(err)
	}
	want := []Call{
		{Principal: "engine", Service: "SQS", Operation: "GetQueueUrl"},
		{Principal: "engine", Service: "SQS", Operation: "SendMessage", Error: "AccessDenied"},
		{Principal: "engine", Service: "SFN", Operation: "DescribeExecution"},
	}
	if len(calls) != len(want) {
		t.Fatalf("calls = %+v, want %+v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("call %d = %+v, want %+v", i, calls[i], want[i])
		}
	}
}
