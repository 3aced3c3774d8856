// Command infra is the AWS CDK app that deploys Maestro: network, Aurora
// PostgreSQL, the engine on ECS Fargate and the API Lambda behind API
// Gateway. cdk.json at the repository root runs it with `go run ./infra`;
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
	if _, err := os.Stat(cfg.APICodePath); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("API Lambda package %s not found: run `make build` first", cfg.APICodePath)
	} else if err != nil {
		return fmt.Errorf("API Lambda package: %w", err)
	}
	assets := Assets{
		APICode:     awslambda.Code_FromAsset(jsii.String(cfg.APICodePath), nil),
		EngineImage: EngineImageFromDir("."),
	}
	if _, err := NewMaestro(app, cfg, assets); err != nil {
		return err
	}
	app.Synth(nil)
	return nil
}
