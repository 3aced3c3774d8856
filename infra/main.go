// Command infra is the AWS CDK app that deploys Maestro: network, Aurora
// PostgreSQL with RDS Proxy, the events, signals and time-trigger queues,
// topics, schedule and functions, the engine on ECS Fargate, the API Lambda
// behind API Gateway, and the alarms and dashboard. `-c maestro:target=emulator`
// deploys the same app into a LocalStack-compatible emulator (`make e2e`). cdk.json at the repository root runs it with `go run ./infra`;
// see docs/deploy.md.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

func main() {
	defer jsii.Close()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		jsii.Close()
		os.Exit(1)
	}
}

func run() error {
	app := awscdk.NewApp(nil)
	cfg, err := ConfigFromContext(NodeContext(app.Node()))
	if err != nil {
		return err
	}
	assets := Assets{Functions: map[string]awslambda.Code{}}
	for _, name := range Built {
		path := cfg.CodePath(name)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("lambda package %s not found: run `make build` first", path)
		} else if err != nil {
			return fmt.Errorf("lambda package %s: %w", path, err)
		}
		assets.Functions[name] = awslambda.Code_FromAsset(jsii.String(path), nil)
	}
	if !cfg.Emulator() {
		assets.EngineImage = EngineImageFromDir(".")
	}
	if _, err := NewMaestro(app, cfg, assets); err != nil {
		return err
	}
	app.Synth(nil)
	return nil
}
