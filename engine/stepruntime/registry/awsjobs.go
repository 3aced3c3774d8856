package registry

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	athenasdk "github.com/aws/aws-sdk-go-v2/service/athena"
	awsbatch "github.com/aws/aws-sdk-go-v2/service/batch"
	awsemr "github.com/aws/aws-sdk-go-v2/service/emr"
	gluesdk "github.com/aws/aws-sdk-go-v2/service/glue"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/awsconf"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/athena"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch"
	"github.com/maestro-aws/maestro/engine/stepruntime/emr"
	"github.com/maestro-aws/maestro/engine/stepruntime/glue"
	"github.com/maestro-aws/maestro/engine/stepruntime/stepfunctions"
)

// awsJobType is one AWS job step type (engine/stepruntime/awsjob): its
// runtime over the AWS configuration, and the state-change events that
// wake its steps.
type awsJobType struct {
	Type  string
	New   func(aws.Config, awsjob.Config, Config) (stepruntime.Runtime, error)
	Event awsjob.EventSource
}

// awsJobTypes are the AWS job step types, one row each.
var awsJobTypes = []awsJobType{
	{athena.Type, func(c aws.Config, jc awsjob.Config, _ Config) (stepruntime.Runtime, error) {
		return athena.New(athenasdk.NewFromConfig(c), jc)
	}, athena.Event},
	{glue.Type, func(c aws.Config, jc awsjob.Config, _ Config) (stepruntime.Runtime, error) {
		return glue.New(gluesdk.NewFromConfig(c), jc)
	}, glue.Event},
	{stepfunctions.Type, func(c aws.Config, jc awsjob.Config, _ Config) (stepruntime.Runtime, error) {
		return stepfunctions.New(sfn.NewFromConfig(c), jc)
	}, stepfunctions.Event},
	{batch.Type, func(c aws.Config, jc awsjob.Config, cfg Config) (stepruntime.Runtime, error) {
		return batch.New(batchConfig(c, jc, cfg.BatchJobQueue))
	}, batch.Event},
	{emr.Type, func(c aws.Config, jc awsjob.Config, cfg Config) (stepruntime.Runtime, error) {
		return emr.New(emr.Config{Client: awsemr.NewFromConfig(c), ClusterID: cfg.EMRClusterID, Jobs: jc.Jobs, Logger: jc.Logger})
	}, emr.Event},
}

// batchConfig is the Batch runtime's configuration (also the Notebook
// carrier's) with queue as its default job queue.
func batchConfig(c aws.Config, jc awsjob.Config, queue string) batch.Config {
	return batch.Config{Client: awsbatch.NewFromConfig(c), JobQueue: queue, Jobs: jc.Jobs, Logger: jc.Logger}
}

// AWSJobEvents are the state-change events that wake AWS job steps.
func AWSJobEvents() []awsjob.EventSource {
	out := make([]awsjob.EventSource, 0, len(awsJobTypes))
	for _, t := range awsJobTypes {
		out = append(out, t.Event)
	}
	return out
}

// awsJobConfig is the AWS job steps' configuration. With a database and an
// events queue their jobs are registered for the event path and their
// fallback poll may be long.
func awsJobConfig(cfg Config, db *pgxpool.Pool, logger *slog.Logger) awsjob.Config {
	jc := awsjob.Config{Logger: logger}
	if db != nil && cfg.AWSJobEventsQueue != "" {
		jc.Jobs = awsjob.NewStore(db)
	}
	return jc
}

// withAWSJobs registers the AWS job step types.
func withAWSJobs(reg stepruntime.Registry, cfg Config, awsCfg aws.Config, jc awsjob.Config) error {
	for _, t := range awsJobTypes {
		rt, err := t.New(awsCfg, jc, cfg)
		if err != nil {
			return fmt.Errorf("%s runtime: %w", t.Type, err)
		}
		reg[t.Type] = rt
	}
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
		Jobs: awsjob.NewStore(db), Sources: AWSJobEvents(), Logger: logger})
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	logger.Info("receiving AWS job events", "queue_url", cfg.AWSJobEventsQueue)
	return c, nil
}
