package registry

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	athenasdk "github.com/aws/aws-sdk-go-v2/service/athena"
	gluesdk "github.com/aws/aws-sdk-go-v2/service/glue"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/awsconf"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/athena"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/stepruntime/glue"
	"github.com/maestro-aws/maestro/engine/stepruntime/stepfunctions"
)

// The AWS job step types (engine/stepruntime/awsjob), each with its
// runtime's constructor and its services' state-change events.
var awsJobTypes = []string{athena.Type, glue.Type, stepfunctions.Type}

// AWSJobEvents are the state-change events that wake AWS job steps.
var AWSJobEvents = []awsjob.EventSource{athena.Event, glue.Event, stepfunctions.Event}

// withAWSJobs registers the AWS job step types. With a database their
// jobs are registered for the event path; with an events queue their
// fallback poll may be long.
func withAWSJobs(reg stepruntime.Registry, cfg Config, awsCfg aws.Config, db *pgxpool.Pool, logger *slog.Logger) error {
	jc := awsjob.Config{Logger: logger}
	if db != nil && cfg.AWSJobEventsQueue != "" {
		jc.Jobs = awsjob.NewStore(db)
	}
	ar, err := athena.New(athenasdk.NewFromConfig(awsCfg), jc)
	if err != nil {
		return err
	}
	gr, err := glue.New(gluesdk.NewFromConfig(awsCfg), jc)
	if err != nil {
		return err
	}
	sr, err := stepfunctions.New(sfn.NewFromConfig(awsCfg), jc)
	if err != nil {
		return err
	}
	reg[athena.Type], reg[glue.Type], reg[stepfunctions.Type] = ar, gr, sr
	return nil
}

// StartAWSJobEvents starts the consumer of the AWS job steps' state-change
// events when cfg names a queue (nil otherwise). It runs until ctx ends or
// its Stop.
func StartAWSJobEvents(ctx context.Context, cfg Config, db *pgxpool.Pool, logger *slog.Logger) (*awsjob.Consumer, error) {
	if cfg.AWSJobEventsQueue == "" || db == nil {
		return nil, nil
	}
	awsCfg, err := awsconf.Load(ctx, endpointOptions(cfg)...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	c, err := awsjob.NewConsumer(awsjob.ConsumerConfig{Client: sqs.NewFromConfig(awsCfg), QueueURL: cfg.AWSJobEventsQueue,
		Jobs: awsjob.NewStore(db), Sources: AWSJobEvents, Logger: logger})
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	logger.Info("receiving AWS job events", "queue_url", cfg.AWSJobEventsQueue)
	return c, nil
}
