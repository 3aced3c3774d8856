package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// QueueProps configures NewQueueWithDLQ.
type QueueProps struct {
	// ConsumerTimeoutSeconds is the timeout of the function that reads the
	// queue; a received message stays hidden six times as long plus the
	// event source's batching window, as AWS advises for a Lambda event
	// source.
	ConsumerTimeoutSeconds int
	// MaxReceiveCount is how often a message is received before it moves to
	// the dead-letter queue; 5 when zero.
	MaxReceiveCount int
}

// QueueWithDLQ is an SQS queue and the dead-letter queue its failed messages
// move to. Both are encrypted (SSE-SQS) and refuse requests without TLS; the
// dead-letter queue keeps messages 14 days, the longest SQS allows, and
// every dead-letter queue has a depth alarm (monitoring.go).
type QueueWithDLQ struct {
	constructs.Construct
	Queue           awssqs.Queue
	DeadLetterQueue awssqs.Queue
}

// NewQueueWithDLQ builds a QueueWithDLQ.
func NewQueueWithDLQ(scope constructs.Construct, id string, props *QueueProps) *QueueWithDLQ {
	c := constructs.NewConstruct(scope, &id)
	receives := props.MaxReceiveCount
	if receives == 0 {
		receives = 5
	}
	dlq := NewDeadLetterQueue(c, "DeadLetterQueue")
	q := awssqs.NewQueue(c, jsii.String("Queue"), &awssqs.QueueProps{
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(6*props.ConsumerTimeoutSeconds + BatchingWindowSeconds)),
		RetentionPeriod:   awscdk.Duration_Days(jsii.Number(4)),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(receives)},
	})
	return &QueueWithDLQ{Construct: c, Queue: q, DeadLetterQueue: dlq}
}

// NewDeadLetterQueue builds a dead-letter queue: encrypted, TLS only,
// messages kept 14 days.
func NewDeadLetterQueue(scope constructs.Construct, id string) awssqs.Queue {
	dlq := awssqs.NewQueue(scope, jsii.String(id), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	})
	nagSuppress(dlq, "AwsSolutions-SQS3", "this is a dead-letter queue; its depth is alarmed")
	nagSuppress(dlq, "Serverless-SQSRedrivePolicy", "this is a dead-letter queue, the end of its path: messages wait here to be inspected and redriven; its depth is alarmed")
	return dlq
}
