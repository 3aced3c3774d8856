package main

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/jsii-runtime-go"
)

// AWSJobEventsQueueEnv is the engine's setting naming the queue the AWS
// job services' state-change events arrive in.
const AWSJobEventsQueueEnv = "MAESTRO_AWS_JOB_EVENTS_QUEUE"

// newAWSJobEvents routes the state-change events of the AWS job steps'
// targets to a queue the engine reads (engine/stepruntime/awsjob,
// Consumer), so that a job's end wakes its step instead of the step
// polling: an EventBridge rule on the default bus per service, matching
// only the configured workgroups, jobs, state machines, Batch job queues
// (the jobs' ends: SUCCEEDED, FAILED) and EMR clusters (the steps' ends).
// Nil when no AWS job step has a target.
func newAWSJobEvents(stack awscdk.Stack, st StepTargets) *QueueWithDLQ {
	t, jt := st.AWSJobs, st.Jobs
	batchQueues := jt.BatchJobQueues
	if len(jt.BatchJobDefinitions) == 0 {
		batchQueues = nil // no Batch steps (JobStatements grants nothing)
	}
	if !t.Any() && len(batchQueues) == 0 && len(jt.EmrClusters) == 0 {
		return nil
	}
	// The engine deletes an event once its wake-up is written: a few
	// seconds; a message it could not handle comes back after this.
	q := NewQueueWithDLQ(stack, "AWSJobEvents", &QueueProps{ConsumerTimeoutSeconds: 10})
	rule := func(id, source, detailType, field string, values []string, more ...any) {
		if len(values) == 0 {
			return
		}
		detail := map[string]any{field: values}
		for i := 0; i+1 < len(more); i += 2 {
			detail[more[i].(string)] = more[i+1]
		}
		awsevents.NewRule(stack, jsii.String(id), &awsevents.RuleProps{
			Description: jsii.String("Maestro AWS job steps: " + detailType + " of the configured targets, to the engine"),
			EventPattern: &awsevents.EventPattern{Source: jsii.Strings(source), DetailType: jsii.Strings(detailType),
				Detail: &detail},
			// An event EventBridge could not deliver lands in the queue's
			// dead-letter queue, which is alarmed.
			Targets: &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(q.Queue,
				&awseventstargets.SqsQueueProps{DeadLetterQueue: q.DeadLetterQueue})},
		})
	}
	rule("AthenaQueryEvents", "aws.athena", "Athena Query State Change", "workgroupName", names(t.AthenaWorkgroups, "/"))
	rule("GlueJobEvents", "aws.glue", "Glue Job State Change", "jobName", names(t.GlueJobs, "/"))
	var machines []string
	for _, sm := range t.StateMachines {
		if strings.HasPrefix(sm, "arn:") {
			machines = append(machines, sm)
		} else {
			machines = append(machines, *stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("states"),
				Resource: jsii.String("stateMachine"), ResourceName: jsii.String(sm), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME}))
		}
	}
	rule("StateMachineEvents", "aws.states", "Step Functions Execution Status Change", "stateMachineArn", machines)
	var queues []string
	for _, jq := range batchQueues {
		if !strings.HasPrefix(jq, "arn:") {
			jq = *stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("batch"), Resource: jsii.String("job-queue"),
				ResourceName: jsii.String(jq), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME})
		}
		queues = append(queues, jq)
	}
	// Only the ends wake a step: the states before them would cost a
	// DescribeJobs each for nothing.
	rule("BatchJobEvents", "aws.batch", "Batch Job State Change", "jobQueue", queues,
		"status", []string{"SUCCEEDED", "FAILED"})
	rule("EmrStepEvents", "aws.emr", "EMR Step Status Change", "clusterId", names(jt.EmrClusters, "/"),
		"state", []string{"COMPLETED", "FAILED", "CANCELLED", "INTERRUPTED"})
	return q
}

// names are the resource names of refs: an ARN's part after its last sep.
func names(refs []string, sep string) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		if strings.HasPrefix(r, "arn:") {
			r = r[strings.LastIndex(r, sep)+1:]
		}
		out = append(out, r)
	}
	return out
}
