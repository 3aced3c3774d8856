// Command publisher is the publisher Lambda: its event source is the SQS
// queue of internal events the engine feeds (ReportBatchItemFailures on),
// and it publishes external events to MAESTRO_EVENT_TOPIC_ARN and alerts to
// MAESTRO_ALERT_TOPIC_ARN (functions/internal/publisher), writing each
// invocation's PublishFailures as an EMF line to stdout. It needs no
// database.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/maestro-aws/maestro/engine/awsconf"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/functions/internal/publisher"
)

func main() {
	ctx := context.Background()
	logger := tracing.NewLogger(slog.NewJSONHandler(os.Stdout, nil))
	tp, err := tracing.Setup(ctx, tracing.ServicePublisher, tracing.Options{})
	if err != nil {
		logger.Error("cold start failed: tracing", "error", err.Error())
		os.Exit(1)
	}
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		logger.Error("cold start failed: aws config", "error", err.Error())
		os.Exit(1)
	}
	h, err := publisher.New(publisher.Config{
		Client:        sns.NewFromConfig(cfg),
		EventTopicARN: os.Getenv("MAESTRO_EVENT_TOPIC_ARN"),
		AlertTopicARN: os.Getenv("MAESTRO_ALERT_TOPIC_ARN"),
		ClusterName:   os.Getenv("MAESTRO_CLUSTER_NAME"),
		Logger:        logger,
		Metrics:       metrics.New(os.Stdout, metrics.ServicePublisher),
	})
	if err != nil {
		logger.Error("cold start failed: MAESTRO_EVENT_TOPIC_ARN and MAESTRO_ALERT_TOPIC_ARN must be set", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(tracing.Lambda(tp, "publish", h.Handle))
}
