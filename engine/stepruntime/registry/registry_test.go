package registry_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/registry"
	"github.com/maestro-aws/maestro/engine/workflow"
)

func TestFromEnv(t *testing.T) {
	env := map[string]string{
		"MAESTRO_HTTP_ALLOWED_HOSTS": "api.example.com, *.internal.example.com,", "MAESTRO_AWS_ENDPOINT": "http://127.0.0.1:4566",
		"MAESTRO_ECS_CLUSTER": "jobs", "MAESTRO_ECS_SUBNETS": "subnet-1,subnet-2", "MAESTRO_ECS_SECURITY_GROUPS": "sg-1",
		"MAESTRO_ECS_ASSIGN_PUBLIC_IP": "true", "MAESTRO_AWS_JOB_EVENTS_QUEUE": "https://sqs.eu-west-1.amazonaws.com/123456789012/job-events",
	}
	got := registry.FromEnv(func(k string) string { return env[k] })
	want := registry.Config{HTTPAllowedHosts: []string{"api.example.com", "*.internal.example.com"}, AWSEndpoint: "http://127.0.0.1:4566",
		ECSCluster: "jobs", ECSSubnets: []string{"subnet-1", "subnet-2"}, ECSSecurityGroups: []string{"sg-1"}, ECSAssignPublicIP: true,
		AWSJobEventsQueue: "https://sqs.eu-west-1.amazonaws.com/123456789012/job-events"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestNew(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")

	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	reg, err := registry.New(context.Background(), registry.Config{}, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"NoOp", "Sleep", "Http", "Lambda", "EcsTask", "Athena", "Glue", "StepFunctions"} {
		if reg[typ] == nil {
			t.Errorf("no %s runtime", typ)
		}
	}
	for _, typ := range []string{"EcsTask", "Athena", "Glue", "StepFunctions"} {
		r := reg[typ].Start(context.Background(), &stepruntime.Attempt{})
		if r.State != stepruntime.FatalError || !strings.Contains(r.Message, "AWS_REGION") {
			t.Errorf("%s without a region: %s %s", typ, r.State, r.Message)
		}
	}

	t.Setenv("AWS_REGION", "eu-west-1")
	reg, err = registry.New(context.Background(), registry.Config{ECSCluster: "jobs", ECSSubnets: []string{"subnet-1"}}, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	a := &stepruntime.Attempt{Params: map[string]any{"ecs_task": map[string]any{"task_definition": "etl"}}}
	if r := reg["EcsTask"].Start(context.Background(), a); r.State != stepruntime.Done {
		t.Errorf("EcsTask with the engine's defaults: %s %s", r.State, r.Message)
	}
	a = &stepruntime.Attempt{Params: map[string]any{"athena": map[string]any{"query": "SELECT 1", "colour": "red"}}}
	if r := reg["Athena"].Start(context.Background(), a); r.State != stepruntime.FatalError || !strings.Contains(r.Message, "athena.colour: unknown field") {
		t.Errorf("Athena with an unknown field: %s %s", r.State, r.Message)
	}
}

// The registry's runtimes are exactly the runnable types of the step-type
// table, which validation and the API read: a type validated but not run,
// or run but refused at push, fails here.
func TestRegistryCoversTheStepTypeTable(t *testing.T) {
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	for _, region := range []string{"", "eu-west-1"} {
		t.Setenv("AWS_REGION", region)
		t.Setenv("AWS_DEFAULT_REGION", "")
		reg, err := registry.New(context.Background(), registry.Config{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		registered := slices.Sorted(maps.Keys(reg))
		runnable := workflow.DefaultStepTypes()
		slices.Sort(runnable)
		if !slices.Equal(registered, runnable) {
			t.Errorf("region %q: runtimes for %v, the step-type table runs %v", region, registered, runnable)
		}
		for _, s := range workflow.StepTypes() {
			if _, ok := reg[string(s.Type)]; ok != s.Runs() {
				t.Errorf("region %q: %s has a runtime %v, the table says it runs %v", region, s.Type, ok, s.Runs())
			}
		}
	}
}

// Notebook steps run only with a carrier: without one they fail saying
// what to set; with one they check their params against it; a carrier
// that does not exist stops the engine at start.
func TestNotebookCarrier(t *testing.T) {
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_REGION", "eu-west-1")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &stepruntime.Attempt{StepID: "nb", UUID: "6f1c2f9e-0d7b-4c55-9a43-1d2b3c4d5e6f",
		Params: map[string]any{"notebook": map[string]any{"input_path": "s3://nb/in.ipynb"}}}

	reg, err := registry.New(context.Background(), registry.Config{}, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	if r := reg["Notebook"].Start(context.Background(), a); r.State != stepruntime.FatalError || !strings.Contains(r.Message, "MAESTRO_NOTEBOOK_CARRIER") {
		t.Errorf("no carrier: %s %s", r.State, r.Message)
	}

	cfg := registry.FromEnv(func(k string) string {
		return map[string]string{"MAESTRO_NOTEBOOK_CARRIER": "Batch", "MAESTRO_NOTEBOOK_JOB_DEFINITION": "papermill",
			"MAESTRO_BATCH_JOB_QUEUE": "nb-queue", "MAESTRO_NOTEBOOK_OUTPUT_PREFIX": "s3://nb/out/", "MAESTRO_EMR_CLUSTER_ID": "j-1"}[k]
	})
	if cfg.NotebookCarrier != "Batch" || cfg.BatchJobQueue != "nb-queue" || cfg.EMRClusterID != "j-1" || cfg.NotebookOutputPrefix != "s3://nb/out/" {
		t.Fatalf("config %+v", cfg)
	}
	reg, err = registry.New(context.Background(), cfg, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	if r := reg["Notebook"].Start(context.Background(), a); r.State != stepruntime.Done {
		t.Errorf("Batch carrier: %s %s", r.State, r.Message)
	}
	emr := &stepruntime.Attempt{UUID: a.UUID, Params: map[string]any{"emr": map[string]any{"step": map[string]any{"args": []any{"x"}}}}}
	if r := reg["Emr"].Start(context.Background(), emr); r.State != stepruntime.Done {
		t.Errorf("Emr with the engine's default cluster: %s %s", r.State, r.Message)
	}

	cfg.NotebookCarrier = "Kubernetes"
	if _, err := registry.New(context.Background(), cfg, nil, logger); err == nil || !strings.Contains(err.Error(), "MAESTRO_NOTEBOOK_CARRIER") {
		t.Errorf("a Kubernetes carrier: %v", err)
	}
}

// The events consumer understands the state-change events of every AWS job
// type, Batch's and EMR's included, each for its own service's jobs.
func TestAWSJobEvents(t *testing.T) {
	got := map[string]string{}
	for _, e := range registry.AWSJobEvents() {
		got[e.DetailType] = e.Source + " " + e.IDField + " " + e.Service
	}
	want := map[string]string{
		"Athena Query State Change":              "aws.athena queryExecutionId athena",
		"Glue Job State Change":                  "aws.glue jobRunId glue",
		"Step Functions Execution Status Change": "aws.states executionArn states",
		"Batch Job State Change":                 "aws.batch jobId batch",
		"EMR Step Status Change":                 "aws.emr stepId emr",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v\nwant %v", got, want)
	}
}
