package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// EventTypeAttribute is the SNS message attribute that carries an external
// event's Maestro type (WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT, ...); the
// example subscriber's default filter policy is on it.
const EventTypeAttribute = "type"

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
	// event topic's message attributes; nil receives every event.
	SubscriberFilter map[string]any
	// AlarmEmail, when set, is subscribed to the alert topic.
	AlarmEmail string
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

	const publisherTimeout = 30
	queue := NewQueueWithDLQ(stack, "InternalEvents", &QueueProps{ConsumerTimeoutSeconds: publisherTimeout})
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
		alerts.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(props.AlarmEmail), nil))
	}

	subscriber := NewQueueWithDLQ(stack, "ExampleSubscriber", &QueueProps{ConsumerTimeoutSeconds: 5})
	var filter *map[string]awssns.SubscriptionFilter
	if len(props.SubscriberFilter) > 0 {
		filter = subscriptionFilter(props.SubscriberFilter)
	}
	events.AddSubscription(awssnssubscriptions.NewSqsSubscription(subscriber.Queue, &awssnssubscriptions.SqsSubscriptionProps{
		FilterPolicy:       filter,
		RawMessageDelivery: jsii.Bool(false),
		DeadLetterQueue:    subscriber.DeadLetterQueue,
	}))

	s := &EventsStack{Stack: stack, Queue: queue, EventTopic: events, AlertTopic: alerts, Subscriber: subscriber}
	if props.PublisherCode != nil {
		fn := NewFunction(stack, "Publisher", &FunctionProps{
			FunctionBase: props.Functions,
			Description:  "Maestro publisher: internal events to the SNS event and alert topics",
			Code:         props.PublisherCode,
			Environment: map[string]string{
				"MAESTRO_EVENT_TOPIC_ARN": *events.TopicArn(),
				"MAESTRO_ALERT_TOPIC_ARN": *alerts.TopicArn(),
			},
			ReservedConcurrency: props.ReservedConcurrency,
			Timeout:             awscdk.Duration_Seconds(jsii.Number(publisherTimeout)),
		})
		events.GrantPublish(fn.Role)
		alerts.GrantPublish(fn.Role)
		fn.ConsumeQueue(queue.Queue)
		s.Publisher = fn
	}

	output(stack, "InternalEventsQueueUrl", queue.Queue.QueueUrl(), "the engine's MAESTRO_EVENT_QUEUE_URL")
	output(stack, "EventTopicArn", events.TopicArn(), "SNS topic of external events")
	output(stack, "AlertTopicArn", alerts.TopicArn(), "SNS topic of alerts and alarms")
	output(stack, "ExampleSubscriberQueueUrl", subscriber.Queue.QueueUrl(), "example subscriber of the event topic")
	return s
}

// subscriptionFilter turns a filter policy written as JSON (attribute name
// to a list of allowed strings) into the CDK's form.
func subscriptionFilter(policy map[string]any) *map[string]awssns.SubscriptionFilter {
	out := map[string]awssns.SubscriptionFilter{}
	for attr, v := range policy {
		var allow []*string
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				if s, ok := e.(string); ok {
					allow = append(allow, jsii.String(s))
				}
			}
		case string:
			allow = append(allow, jsii.String(x))
		}
		out[attr] = awssns.SubscriptionFilter_StringFilter(&awssns.StringConditions{Allowlist: &allow})
	}
	return &out
}

// output adds a stack output.
func output(stack awscdk.Stack, id string, value *string, description string) {
	awscdk.NewCfnOutput(stack, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(description)})
}
