package main

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// SignalsStackProps configures NewSignalsStack.
type SignalsStackProps struct {
	awscdk.StackProps
	// Functions is what the signals function shares with every function.
	Functions FunctionBase
	// Code is functions/signals' package; nil deploys the queue without the
	// function.
	Code awslambda.Code
	// ReservedConcurrency caps the function; 0 leaves it unreserved.
	ReservedConcurrency int
	// S3Buckets may send event notifications to the queue.
	S3Buckets []string
	// S3SignalRules is the function's MAESTRO_S3_SIGNAL_RULES (JSON).
	S3SignalRules string
	// TableChangeGlueDatabases and TableChangeTableBuckets are where
	// EventBridge rules take Iceberg commits from (Config).
	TableChangeGlueDatabases []string
	TableChangeTableBuckets  []string
	// Iceberg is the catalog the function reads an event's snapshot and
	// incremental runs' added files from.
	Iceberg IcebergAccess
}

// SignalsStack is where signals come in: one SQS queue that takes Maestro
// signal JSON, S3 event notifications (from S3Buckets), table-update events
// and SNS-wrapped messages, read by functions/signals with partial batch
// failures, and a dead-letter queue for messages that keep failing.
type SignalsStack struct {
	awscdk.Stack
	// Queue is the signals queue with its dead-letter queue.
	Queue *QueueWithDLQ
	// Function is functions/signals; nil until its code is deployed.
	Function *Function
}

// NewSignalsStack builds the signals stack.
func NewSignalsStack(scope constructs.Construct, id string, props *SignalsStackProps) *SignalsStack {
	stack := awscdk.NewStack(scope, &id, &props.StackProps)

	const timeout = 60
	queue := NewQueueWithDLQ(stack, "SignalsQueue", &QueueProps{ConsumerTimeoutSeconds: timeout})
	for _, bucket := range props.S3Buckets {
		queue.Queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String(fmt.Sprintf("S3Notifications%s", sidSafe(bucket))),
			Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("s3.amazonaws.com"), nil)},
			Actions:    jsii.Strings("sqs:SendMessage"),
			Resources:  &[]*string{queue.Queue.QueueArn()},
			Conditions: &map[string]any{
				"ArnLike":      map[string]any{"aws:SourceArn": fmt.Sprintf("arn:%s:s3:::%s", *awscdk.Aws_PARTITION(), bucket)},
				"StringEquals": map[string]any{"aws:SourceAccount": *awscdk.Aws_ACCOUNT_ID()},
			},
		}))
	}

	tableChangeRules(stack, queue, props)

	s := &SignalsStack{Stack: stack, Queue: queue}
	if props.Code != nil {
		rules := props.S3SignalRules
		if rules == "" {
			rules = "[]"
		}
		env := map[string]string{"MAESTRO_S3_SIGNAL_RULES": rules}
		for k, v := range props.Iceberg.Environment() {
			env[k] = v
		}
		fn := NewFunction(stack, "Signals", &FunctionProps{
			FunctionBase:        props.Functions,
			Description:         "Maestro signals: SQS messages to signal instances, trigger starts and step wake-ups",
			Code:                props.Code,
			Environment:         env,
			ReservedConcurrency: props.ReservedConcurrency,
			Timeout:             awscdk.Duration_Seconds(jsii.Number(timeout)),
		})
		fn.ConsumeQueue(queue.Queue)
		props.Iceberg.Grant(stack, fn.Role)
		s.Function = fn
	}
	output(stack, "SignalsQueueUrl", queue.Queue.QueueUrl(), "where signals, S3 notifications and table-update events are sent")
	output(stack, "SignalsQueueArn", queue.Queue.QueueArn(), "the signals queue's ARN, for S3 bucket notifications")
	return s
}

// sidSafe keeps the characters a policy statement id may hold.
func sidSafe(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			out = append(out, r)
		}
	}
	return string(out)
}

// tableChangeRules sends the Iceberg commits of the configured Glue
// databases and S3 Tables table buckets to the signals queue
// (docs/incremental.md, "Where changes come from"). No rule when none is
// configured.
func tableChangeRules(stack awscdk.Stack, queue *QueueWithDLQ, props *SignalsStackProps) {
	rule := func(id, description string, pattern *awsevents.EventPattern) {
		awsevents.NewRule(stack, jsii.String(id), &awsevents.RuleProps{
			Description:  jsii.String(description),
			EventPattern: pattern,
			// An event EventBridge could not deliver lands in the queue's
			// dead-letter queue, which is alarmed.
			Targets: &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(queue.Queue,
				&awseventstargets.SqsQueueProps{DeadLetterQueue: queue.DeadLetterQueue})},
		})
	}
	if dbs := props.TableChangeGlueDatabases; len(dbs) > 0 {
		rule("GlueTableChanges", "Maestro table-change signals: Glue Data Catalog table state changes of the configured databases",
			&awsevents.EventPattern{Source: jsii.Strings("aws.glue"), DetailType: jsii.Strings("Glue Data Catalog Table State Change"),
				Detail: &map[string]any{"databaseName": dbs, "typeOfChange": []string{"CreateTable", "UpdateTable"}}})
	}
	if buckets := props.TableChangeTableBuckets; len(buckets) > 0 {
		rule("S3TablesTableChanges", "Maestro table-change signals: S3 Tables commits (UpdateTableMetadataLocation) of the configured table buckets",
			&awsevents.EventPattern{Source: jsii.Strings("aws.s3tables"), DetailType: jsii.Strings("AWS API Call via CloudTrail"),
				Detail: &map[string]any{"eventSource": []string{"s3tables.amazonaws.com"},
					"eventName":         []string{"UpdateTableMetadataLocation"},
					"requestParameters": map[string]any{"tableBucketARN": buckets}}})
	}
}
