// Command signals is the signals Lambda: its event source is the signals
// SQS queue (ReportBatchItemFailures on, a dead-letter queue behind it),
// and it turns each batch's messages (Maestro signal JSON, S3 event
// notifications, table updates, in SNS or EventBridge envelopes or not)
// into signal instances, step wake-ups and signal-trigger runs
// (functions/internal/signals). It needs DB_SECRET_ARN (or DATABASE_URL),
// MAESTRO_GROUP_COUNT and MAESTRO_S3_SIGNAL_RULES.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/functions/signals/internal/signalsenv"
)

func main() {
	ctx := context.Background()
	logger := tracing.NewLogger(slog.NewJSONHandler(os.Stdout, nil))
	tp, err := tracing.Setup(ctx, tracing.ServiceSignals, tracing.Options{})
	if err != nil {
		logger.Error("cold start failed: tracing", "error", err.Error())
		os.Exit(1)
	}
	h, err := signalsenv.Handler(ctx, logger)
	if err != nil {
		logger.Error("cold start failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(tracing.Lambda(tp, "signals", h.Handle))
}
