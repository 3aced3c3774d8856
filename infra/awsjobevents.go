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
// only the configured workgroups, jobs and state machines. Nil when no
// AWS job step has a target.
func newAWSJobEvents(stack awscdk.Stack, t AWSJobTargets) *QueueWithDLQ {
	if !t.Any() {
		return nil
	}
	// The engine deletes an event once its wake-up is written: a few
	// seconds; a message it could not handle comes back after this.
	q := NewQueueWithDLQ(stack, "AWSJobEvents", &QueueProps{ConsumerTimeoutSeconds: 10})
	rule := func(id, source, detailType, field string, values []string) {
		if len(values) == 0 {
			return
		}
		detail := map[string]any{field: values}
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
