package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/engine/event"
)

// EventTypeAttribute is the SNS message attribute that carries an external
// event's Maestro type (WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT, ...); the
// example subscriber's default filter policy is on it.
const EventTypeAttribute = event.AttributeType

// PublisherTimeoutSeconds bounds one publisher invocation (ten PublishBatch
// calls at most); the internal-events queue hides a received message six
// times as long.
const PublisherTimeoutSeconds = 30

// EventsStackProps configures NewEventsStack.
type EventsStackProps struct {
	awscdk.StackProps
	// Functions is what the publisher shares with every function.
	Functions FunctionBase
	// PublisherCode is functions/publisher's package; nil deploys the
	// queues and topics without the function.
	PublisherCode awslambda.Code
	// ReservedConcurrency caps the publisher; 0 leaves it unreserved.
	ReservedConcurrency int
	// SubscriberFilter is the example subscriber's SNS filter policy on the
	// event topic's message attributes, as SNS takes it; nil receives every
	// event.
	SubscriberFilter map[string]any
	// AlarmEmail, when set, is subscribed to the alert topic.
	AlarmEmail string
	// Emulator grants what only the emulator asks for (EmulatorBatchGrant).
	Emulator bool
}

// EventsStack carries Maestro's events out: the engine hands internal events
// to Queue (MAESTRO_EVENT_QUEUE_URL, SendMessageBatch), the publisher
// function reads them and publishes external events to EventTopic with
// message attributes, and alerts (and every alarm) to AlertTopic. An example
// subscriber queue shows how a downstream consumer subscribes with a filter
// policy.
type EventsStack struct {
	awscdk.Stack
	// Queue holds internal events from the engine, with its dead-letter queue.
	Queue *QueueWithDLQ
	// EventTopic is the one SNS topic of external events.
	EventTopic awssns.Topic
	// AlertTopic receives alerts from the publisher and every alarm.
	AlertTopic awssns.Topic
	// Subscriber is the example subscriber queue on EventTopic.
	Subscriber *QueueWithDLQ
	// Publisher is functions/publisher; nil until its code is deployed.
	Publisher *Function
}

// NewEventsStack builds the events stack.
func NewEventsStack(scope constructs.Construct, id string, props *EventsStackProps) *EventsStack {
	stack := awscdk.NewStack(scope, &id, &props.StackProps)

	queue := NewQueueWithDLQ(stack, "InternalEvents", &QueueProps{ConsumerTimeoutSeconds: PublisherTimeoutSeconds})
	topic := func(id, name string) awssns.Topic {
		t := awssns.NewTopic(stack, jsii.String(id), &awssns.TopicProps{
			DisplayName: jsii.String(name),
			EnforceSSL:  jsii.Bool(true),
		})
		nagSuppress(t, "AwsSolutions-SNS2", "not encrypted with KMS: the messages are workflow status events and alarm notices (no secrets), "+
			"and CloudWatch alarms cannot publish to a topic under the AWS-managed SNS key")
		return t
	}
	events := topic("EventTopic", "Maestro events")
	alerts := topic("AlertTopic", "Maestro alerts")
	if props.AlarmEmail != "" {
		email := alerts.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(props.AlarmEmail), nil))
		nagSuppress(email, "Serverless-SNSRedrivePolicy", "an alert e-mail SNS could not deliver has nobody to redrive it to; every alarm stays visible in CloudWatch and on the dashboard")
	}

	// Raw delivery: the subscriber's message body is the event itself and
	// the SNS message attributes arrive as SQS message attributes.
	subscriber := NewQueueWithDLQ(stack, "ExampleSubscriber", &QueueProps{ConsumerTimeoutSeconds: 5})
	sub := events.AddSubscription(awssnssubscriptions.NewSqsSubscription(subscriber.Queue, &awssnssubscriptions.SqsSubscriptionProps{
		RawMessageDelivery: jsii.Bool(true),
		DeadLetterQueue:    subscriber.DeadLetterQueue,
	}))
	if len(props.SubscriberFilter) > 0 {
		// The policy as written (any SNS filter policy: lists of values,
		// prefix, numeric and anything-but conditions, "$or"), on the
		// message attributes the publisher sets (event.AttributeNames;
		// Config.Validate checks the names).
		cfn := sub.Node().DefaultChild().(awssns.CfnSubscription)
		cfn.AddPropertyOverride(jsii.String("FilterPolicy"), props.SubscriberFilter)
		cfn.AddPropertyOverride(jsii.String("FilterPolicyScope"), jsii.String("MessageAttributes"))
	}

	s := &EventsStack{Stack: stack, Queue: queue, EventTopic: events, AlertTopic: alerts, Subscriber: subscriber}
	if props.PublisherCode != nil {
		// The publisher needs no database: no secret, proxy or group count,
		// and it runs outside the VPC, so that publishing depends on no NAT
		// gateway or endpoint (SNS is a public AWS endpoint).
		base := props.Functions
		base.DatabaseSecret, base.ProxyEndpoint, base.GroupCount = nil, "", 0
		base.Vpc, base.SecurityGroup = nil, nil
		fn := NewFunction(stack, "Publisher", &FunctionProps{
			FunctionBase: base,
			Description:  "Maestro publisher: internal events to the SNS event and alert topics",
			Code:         props.PublisherCode,
			Environment: map[string]string{
				"MAESTRO_EVENT_TOPIC_ARN": *events.TopicArn(),
				"MAESTRO_ALERT_TOPIC_ARN": *alerts.TopicArn(),
			},
			ReservedConcurrency: props.ReservedConcurrency,
			Timeout:             awscdk.Duration_Seconds(jsii.Number(PublisherTimeoutSeconds)),
		})
		events.GrantPublish(fn.Role)
		alerts.GrantPublish(fn.Role)
		if props.Emulator {
			EmulatorBatchGrant(fn.Role, "sns:PublishBatch", events.TopicArn(), alerts.TopicArn())
		}
		fn.ConsumeQueue(queue.Queue)
		s.Publisher = fn
	}

	output(stack, "InternalEventsQueueUrl", queue.Queue.QueueUrl(), "the engine's MAESTRO_EVENT_QUEUE_URL")
	output(stack, "EventTopicArn", events.TopicArn(), "SNS topic of external events")
	output(stack, "AlertTopicArn", alerts.TopicArn(), "SNS topic of alerts and alarms")
	output(stack, "ExampleSubscriberQueueUrl", subscriber.Queue.QueueUrl(), "example subscriber of the event topic")
	return s
}

// output adds a stack output.
func output(stack awscdk.Stack, id string, value *string, description string) {
	awscdk.NewCfnOutput(stack, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(description)})
}
