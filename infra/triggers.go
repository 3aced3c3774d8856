package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdadestinations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// TimeTriggerSchedule is when EventBridge Scheduler invokes the time-trigger
// function: at the start of every minute (UTC). Cron triggers are due on
// whole minutes, so they fire seconds late; a rate(1 minute) schedule ticks
// at its creation's second and would start them up to a minute late, past
// the TriggerLag alarm's threshold.
const TimeTriggerSchedule = "cron(* * * * ? *)"

// TimeTriggerInput is the event the schedule sends: the time the invocation
// was scheduled for (RFC 3339, the function measures trigger lag from it)
// and the invocation's id, filled in by Scheduler.
const TimeTriggerInput = `{"scheduled_time":"<aws.scheduler.scheduled-time>","execution_id":"<aws.scheduler.execution-id>"}`

// The time-trigger function's asynchronous invocation settings: Lambda
// retries a failed invocation this often, never past this age.
const (
	TimeTriggerRetryAttempts      = 1
	TimeTriggerMaxEventAgeSeconds = 120
)

// TriggersStackProps configures NewTriggersStack.
type TriggersStackProps struct {
	awscdk.StackProps
	// Functions is what the time-trigger function shares with every function.
	Functions FunctionBase
	// Code is functions/timetrigger's package; nil deploys only the
	// dead-letter queue.
	Code awslambda.Code
	// ReservedConcurrency caps the function; 0 leaves it unreserved.
	ReservedConcurrency int
	// Emulator leaves out the function's asynchronous invocation settings
	// (AWS::Lambda::EventInvokeConfig), which the emulator cannot host.
	Emulator bool
}

// TriggersStack fires time triggers: an EventBridge Scheduler schedule
// invokes functions/timetrigger at the start of every minute, retries a failed invocation
// and sends one that keeps failing to a dead-letter queue.
type TriggersStack struct {
	awscdk.Stack
	// DeadLetterQueue receives invocations Scheduler could not deliver and
	// those the function failed past Lambda's retries (on-failure
	// destination).
	DeadLetterQueue awssqs.Queue
	// Function is functions/timetrigger; nil until its code is deployed.
	Function *Function
	// Schedule invokes Function every minute; nil with Function.
	Schedule awsscheduler.CfnSchedule
}

// NewTriggersStack builds the triggers stack.
func NewTriggersStack(scope constructs.Construct, id string, props *TriggersStackProps) *TriggersStack {
	stack := awscdk.NewStack(scope, &id, &props.StackProps)

	dlq := NewDeadLetterQueue(stack, "ScheduleDeadLetterQueue")
	s := &TriggersStack{Stack: stack, DeadLetterQueue: dlq}
	if props.Code == nil {
		return s
	}
	fn := NewFunction(stack, "TimeTrigger", &FunctionProps{
		FunctionBase:        props.Functions,
		Description:         "Maestro time triggers: starts the runs of due cron triggers, every minute",
		Code:                props.Code,
		ReservedConcurrency: props.ReservedConcurrency,
		// A minute's due triggers must be started before the next minute.
		Timeout: awscdk.Duration_Seconds(jsii.Number(55)),
	})
	// Scheduler invokes the function asynchronously: its retry policy and
	// dead-letter queue cover only delivery. A function error is Lambda's to
	// retry, so Lambda's own async settings bound it: one retry (the run
	// starts carry deterministic request ids, so a repeat is a duplicate),
	// none after two minutes (the next minutes' invocations start what is
	// due), and an invocation that still fails goes to the same dead-letter
	// queue, whose depth is alarmed.
	if !props.Emulator {
		fn.Function.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
			OnFailure:     awslambdadestinations.NewSqsDestination(dlq),
			RetryAttempts: jsii.Number(TimeTriggerRetryAttempts),
			MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(TimeTriggerMaxEventAgeSeconds)),
		})
	}
	role := awsiam.NewRole(stack, jsii.String("ScheduleRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": *awscdk.Aws_ACCOUNT_ID()}},
		}),
		Description: jsii.String("EventBridge Scheduler invoking the Maestro time-trigger function"),
	})
	// The function itself, not its versions and aliases (GrantInvoke would
	// add <arn>:*): the schedule invokes $LATEST.
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("lambda:InvokeFunction"),
		Resources: &[]*string{fn.Function.FunctionArn()},
	}))
	dlq.GrantSendMessages(role)
	schedule := awsscheduler.NewCfnSchedule(stack, jsii.String("Schedule"), &awsscheduler.CfnScheduleProps{
		Description:                jsii.String("Fires Maestro's time triggers every minute"),
		ScheduleExpression:         jsii.String(TimeTriggerSchedule),
		ScheduleExpressionTimezone: jsii.String("UTC"),
		FlexibleTimeWindow:         &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("OFF")},
		State:                      jsii.String("ENABLED"),
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:     fn.Function.FunctionArn(),
			RoleArn: role.RoleArn(),
			Input:   jsii.String(TimeTriggerInput),
			// A late invocation is still useful (the function starts what is
			// due), but past two minutes the next ones have covered it.
			RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{
				MaximumRetryAttempts:     jsii.Number(3),
				MaximumEventAgeInSeconds: jsii.Number(120),
			},
			DeadLetterConfig: &awsscheduler.CfnSchedule_DeadLetterConfigProperty{Arn: dlq.QueueArn()},
		},
	})
	s.Function, s.Schedule = fn, schedule
	return s
}
