// Command migrate is the migrate function: the deploy step that brings the
// database schema up to this release's migrations before any code of the
// release runs (a CloudFormation custom resource in the data stack invokes
// it; see functions/internal/migrate). It links no lambdaenv: its only
// settings are the three secrets.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/functions/internal/migrate"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	cfg, err := migrate.ConfigFromEnv(os.Getenv)
	if err != nil {
		// The custom resource cannot be answered without a handler; fail
		// loudly in the log (CloudFormation times the resource out).
		logger.Error("cold start failed", "error", err.Error())
		os.Exit(1)
	}
	cfg.Fetch, cfg.Logger = dbconn.SecretsManager, logger
	m, err := migrate.New(cfg)
	if err != nil {
		logger.Error("cold start failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(cfn.LambdaWrap(m.HandleCloudFormation))
}
