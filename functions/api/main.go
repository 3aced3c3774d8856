// Command api is the API Lambda: it serves Maestro's REST API for API
// Gateway REST API proxy events.
package main

import (
	"context"
	"log/slog"
	"os"
	_ "time/tzdata" // time zones for triggers, even in images without zoneinfo

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/functions/api/internal/apienv"
	"github.com/maestro-aws/maestro/functions/internal/apigateway"
)

func main() {
	ctx := context.Background()
	logger := tracing.NewLogger(slog.NewJSONHandler(os.Stdout, nil))
	tp, err := tracing.Setup(ctx, tracing.ServiceAPI, tracing.Options{})
	if err != nil {
		logger.Error("cold start failed: tracing", "error", err.Error())
		os.Exit(1)
	}
	handler, err := apienv.Handler(ctx, logger)
	if err != nil {
		logger.Error("cold start failed", "error", err.Error())
		os.Exit(1)
	}
	// One CloudWatch embedded-metric-format line per request (engine/metrics).
	// Each request is a span (tracing.Middleware) continuing API Gateway's trace.
	api := apigateway.New(tracing.Middleware(metrics.HTTP(metrics.New(os.Stdout, metrics.ServiceAPI), handler)))
	lambda.Start(tracing.Lambda(tp, "api", api.Handle))
}
