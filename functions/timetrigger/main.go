// Command timetrigger is the time-trigger Lambda: EventBridge Scheduler
// invokes it every minute, and it fires the due time triggers
// (engine/trigger/scheduler) until none are due or its deadline nears, writing each
// invocation's TriggerLag as an EMF line to stdout.
package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/engine/trigger/scheduler"
	"github.com/maestro-aws/maestro/functions/timetrigger/internal/timetriggerenv"
)

func main() {
	ctx := context.Background()
	logger := tracing.NewLogger(slog.NewJSONHandler(os.Stdout, nil))
	tp, err := tracing.Setup(ctx, tracing.ServiceTimeTrigger, tracing.Options{})
	if err != nil {
		logger.Error("cold start failed: tracing", "error", err.Error())
		os.Exit(1)
	}
	s, err := timetriggerenv.Scheduler(ctx, logger, os.Stdout)
	if err != nil {
		logger.Error("cold start failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(tracingHandler(tp, s))
}

// tracingHandler is the invocation handler: each invocation a span
// continuing Lambda's trace header, flushed through tp before it returns.
func tracingHandler(tp *sdktrace.TracerProvider, s *scheduler.Scheduler) func(context.Context, json.RawMessage) (scheduler.Stats, error) {
	return tracing.Lambda(tp, "time-trigger", s.HandleScheduled)
}
