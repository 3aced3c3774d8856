// Package registry builds an engine's step runtimes from its configuration:
// the built-ins (NoOp, Sleep), Http, and the AWS runtimes (Lambda,
// EcsTask, Batch, Emr, and Notebook over its configured carrier) over
// aws-sdk-go-v2 clients from the default AWS configuration.
// cmd/maestro calls it for `maestro engine` and `maestro dev`.
//
// New is the one registration of step runtimes: its types are exactly the
// runnable types of the model layer's step-type table (workflow.StepTypes),
// which validation, job templates and the API read (a test holds the two
// equal). A new step type is its runtime package, a line here and a row in
// that table.
package registry

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/awsconf"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch"
	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
	"github.com/maestro-aws/maestro/engine/stepruntime/ecstask"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
	"github.com/maestro-aws/maestro/engine/stepruntime/httpstep"
	"github.com/maestro-aws/maestro/engine/stepruntime/lambdastep"
	"github.com/maestro-aws/maestro/engine/stepruntime/notebook"
)

// Config is what the runtimes need to know about their environment.
type Config struct {
	// HTTPAllowedHosts restricts the hosts Http steps may call
	// (MAESTRO_HTTP_ALLOWED_HOSTS, comma-separated; "*.example.com"
	// matches subdomains). Empty allows every host but link-local ones.
	HTTPAllowedHosts []string
	// AWSEndpoint sends every AWS call to one endpoint, an emulator in
	// tests (MAESTRO_AWS_ENDPOINT). Empty uses the real services.
	AWSEndpoint string
	// ECSCluster, ECSSubnets, ECSSecurityGroups and ECSAssignPublicIP are
	// the defaults of EcsTask steps (MAESTRO_ECS_CLUSTER,
	// MAESTRO_ECS_SUBNETS, MAESTRO_ECS_SECURITY_GROUPS, comma-separated,
	// MAESTRO_ECS_ASSIGN_PUBLIC_IP).
	ECSCluster        string
	ECSSubnets        []string
	ECSSecurityGroups []string
	ECSAssignPublicIP bool

	// AWSJobEventsQueue is the SQS queue (URL) EventBridge delivers the AWS
	// job steps' state-change events to (MAESTRO_AWS_JOB_EVENTS_QUEUE).
	// Empty: those steps poll (awsjob.DefaultMaxPollNoEvents at most).
	AWSJobEventsQueue string

	// [aws-steps] part B: Batch, Emr and Notebook.

	// BatchJobQueue is the job queue of Batch steps that set no job_queue
	// (MAESTRO_BATCH_JOB_QUEUE).
	BatchJobQueue string
	// EMRClusterID is the cluster of Emr steps that set no cluster_id
	// (MAESTRO_EMR_CLUSTER_ID).
	EMRClusterID string
	// NotebookCarrier runs Notebook steps: Batch or EcsTask
	// (MAESTRO_NOTEBOOK_CARRIER); empty, Notebook steps fail saying how
	// to set one. A Batch carrier runs MAESTRO_NOTEBOOK_JOB_DEFINITION on
	// MAESTRO_NOTEBOOK_JOB_QUEUE (else the Batch default queue); an
	// EcsTask carrier runs MAESTRO_NOTEBOOK_TASK_DEFINITION (container
	// MAESTRO_NOTEBOOK_CONTAINER) with the EcsTask defaults. Output
	// notebooks go under MAESTRO_NOTEBOOK_OUTPUT_PREFIX (s3://bucket/prefix/).
	NotebookCarrier        string
	NotebookJobQueue       string
	NotebookJobDefinition  string
	NotebookTaskDefinition string
	NotebookContainer      string
	NotebookOutputPrefix   string
}

// FromEnv reads Config from the environment through getenv (os.Getenv).
func FromEnv(getenv func(string) string) Config {
	list := func(name string) []string {
		var out []string
		for _, s := range strings.Split(getenv(name), ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	public, _ := strconv.ParseBool(getenv("MAESTRO_ECS_ASSIGN_PUBLIC_IP"))
	return Config{
		HTTPAllowedHosts:  list("MAESTRO_HTTP_ALLOWED_HOSTS"),
		AWSEndpoint:       strings.TrimSpace(getenv("MAESTRO_AWS_ENDPOINT")),
		ECSCluster:        strings.TrimSpace(getenv("MAESTRO_ECS_CLUSTER")),
		ECSSubnets:        list("MAESTRO_ECS_SUBNETS"),
		ECSSecurityGroups: list("MAESTRO_ECS_SECURITY_GROUPS"),
		ECSAssignPublicIP: public,
		AWSJobEventsQueue: strings.TrimSpace(getenv("MAESTRO_AWS_JOB_EVENTS_QUEUE")),
		BatchJobQueue:     strings.TrimSpace(getenv("MAESTRO_BATCH_JOB_QUEUE")),
		EMRClusterID:      strings.TrimSpace(getenv("MAESTRO_EMR_CLUSTER_ID")),

		NotebookCarrier:        strings.TrimSpace(getenv("MAESTRO_NOTEBOOK_CARRIER")),
		NotebookJobQueue:       strings.TrimSpace(getenv("MAESTRO_NOTEBOOK_JOB_QUEUE")),
		NotebookJobDefinition:  strings.TrimSpace(getenv("MAESTRO_NOTEBOOK_JOB_DEFINITION")),
		NotebookTaskDefinition: strings.TrimSpace(getenv("MAESTRO_NOTEBOOK_TASK_DEFINITION")),
		NotebookContainer:      strings.TrimSpace(getenv("MAESTRO_NOTEBOOK_CONTAINER")),
		NotebookOutputPrefix:   strings.TrimSpace(getenv("MAESTRO_NOTEBOOK_OUTPUT_PREFIX")),
	}
}

// New builds the registry. The AWS configuration comes from the usual
// sources (environment, shared files, the ECS task role); without a
// region, Lambda and EcsTask steps fail with a message that says so.
func New(ctx context.Context, cfg Config, db *pgxpool.Pool, logger *slog.Logger) (stepruntime.Registry, error) {
	reg := stepruntime.Builtins()
	reg[httpstep.Type] = httpstep.New(httpstep.Config{AllowedHosts: cfg.HTTPAllowedHosts})

	awsCfg, err := awsconf.Load(ctx, endpointOptions(cfg)...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		logger.Warn("no AWS region configured (AWS_REGION): Lambda and EcsTask steps will fail")
		reg[lambdastep.Type] = unavailable("no AWS region is configured on this engine (set AWS_REGION)")
		reg[ecstask.Type] = unavailable("no AWS region is configured on this engine (set AWS_REGION)")
		for _, t := range awsJobTypes {
			reg[t.Type] = unavailable("no AWS region is configured on this engine (set AWS_REGION)")
		}
		reg[notebook.Type] = unavailable("no AWS region is configured on this engine (set AWS_REGION)")
		return reg, nil
	}
	return withAWS(reg, cfg, awsCfg, db, logger)
}

func withAWS(reg stepruntime.Registry, cfg Config, awsCfg aws.Config, db *pgxpool.Pool, logger *slog.Logger) (stepruntime.Registry, error) {
	lc := lambdastep.Config{Client: lambda.NewFromConfig(awsCfg)}
	if db != nil {
		lc.Completions = completion.NewStore(db)
	}
	lr, err := lambdastep.New(lc)
	if err != nil {
		return nil, err
	}
	reg[lambdastep.Type] = lr
	er, err := ecstask.New(ecstask.Config{
		Client: ecs.NewFromConfig(awsCfg), Region: awsCfg.Region, Cluster: cfg.ECSCluster,
		Subnets: cfg.ECSSubnets, SecurityGroups: cfg.ECSSecurityGroups, AssignPublicIP: cfg.ECSAssignPublicIP,
		Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	reg[ecstask.Type] = er
	jc := awsJobConfig(cfg, db, logger)
	if err := withAWSJobs(reg, cfg, awsCfg, jc); err != nil {
		return nil, err
	}
	nr, err := notebookRuntime(cfg, awsCfg, jc, er)
	if err != nil {
		return nil, err
	}
	reg[notebook.Type] = nr
	return reg, nil
}

// endpointOptions sends every call to cfg.AWSEndpoint when it is set (the
// SDK itself reads AWS_ENDPOINT_URL).
func endpointOptions(cfg Config) []func(*config.LoadOptions) error {
	if cfg.AWSEndpoint == "" {
		return nil
	}
	return []func(*config.LoadOptions) error{config.WithBaseEndpoint(cfg.AWSEndpoint)}
}

// notebookRuntime is the Notebook runtime over the configured carrier's
// job: a Batch job as Batch steps run them (the state-change events of
// the job wake the notebook's attempt too), or the EcsTask runtime's.
func notebookRuntime(cfg Config, awsCfg aws.Config, jc awsjob.Config, ecsRuntime stepruntime.Runtime) (stepruntime.Runtime, error) {
	nc := notebook.Config{JobQueue: cfg.NotebookJobQueue, JobDefinition: cfg.NotebookJobDefinition,
		TaskDefinition: cfg.NotebookTaskDefinition, Container: cfg.NotebookContainer, OutputPrefix: cfg.NotebookOutputPrefix,
		Objects: notebook.S3Objects{Client: s3.NewFromConfig(awsCfg)}, Logger: jc.Logger}
	switch strings.ToLower(cfg.NotebookCarrier) {
	case "":
		return unavailable("Notebook steps need a carrier on this engine: set MAESTRO_NOTEBOOK_CARRIER to Batch (with " +
			"MAESTRO_NOTEBOOK_JOB_DEFINITION) or EcsTask (with MAESTRO_NOTEBOOK_TASK_DEFINITION), and MAESTRO_NOTEBOOK_OUTPUT_PREFIX"), nil
	case "batch":
		j, err := batch.NewJob(batchConfig(awsCfg, jc, cfg.BatchJobQueue))
		if err != nil {
			return nil, err
		}
		nc.Carrier, nc.Job = notebook.CarrierBatch, j
	case "ecstask":
		nc.Carrier, nc.Job = notebook.CarrierEcsTask, ecsRuntime.(external.Runtime).Job
	default:
		return nil, fmt.Errorf("MAESTRO_NOTEBOOK_CARRIER %q: want Batch or EcsTask", cfg.NotebookCarrier)
	}
	return notebook.New(nc)
}

// unavailable is a runtime that cannot run here; every attempt fails with
// why.
type unavailable string

func (u unavailable) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.FatalError, Message: string(u)}
}

func (u unavailable) Execute(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.FatalError, Message: string(u)}
}

func (unavailable) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}
