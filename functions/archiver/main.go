// Command archiver is the archiver Lambda: EventBridge Scheduler invokes it
// on a schedule (hourly by default), and each invocation archives the
// terminal runs past their retention to the archive bucket and deletes
// them from the database in small batches (engine/retention), writing its
// figures as an EMF line to stdout.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/functions/archiver/internal/archiverenv"
)

func main() {
	ctx := context.Background()
	logger := tracing.NewLogger(slog.NewJSONHandler(os.Stdout, nil))
	h, err := archiverenv.Handler(ctx, logger, os.Stdout)
	if err != nil {
		logger.Error("cold start failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
