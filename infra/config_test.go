package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestConfigFromContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ctx     map[string]any
		want    func(*Config)
		wantErr string
	}{
		{name: "defaults", ctx: nil, want: func(*Config) {}},
		{
			name: "json typed values",
			ctx: map[string]any{
				"maestro:dbMinCapacity": 1.0, "maestro:dbMaxCapacity": 8.0, "maestro:dbReaders": 1.0,
				"maestro:dbDeletionProtection": false, "maestro:dbRemovalPolicy": "destroy",
				"maestro:engineDesiredCount": 3.0, "maestro:logRetentionDays": 7.0,
			},
			want: func(c *Config) {
				c.DBMinCapacity, c.DBMaxCapacity, c.DBReaders = 1, 8, 1
				c.DBDeletionProtection, c.DBRemovalPolicy = false, "destroy"
				c.EngineDesiredCount, c.LogRetentionDays = 3, 7
			},
		},
		{
			name: "strings from -c",
			ctx: map[string]any{
				"maestro:dbMaxCapacity": "16", "maestro:dbDeletionProtection": "false",
				"maestro:lambdaDir": "out", "maestro:apiCloudWatchRole": "false",
				"maestro:admins": "arn:aws:iam::1:user/a, arn:aws:iam::1:role/b", "maestro:apiReservedConcurrency": "0",
				"maestro:s3SignalRules": `[{"bucket":"b","prefix":"p/","signal":"s"}]`,
			},
			want: func(c *Config) {
				c.DBMaxCapacity, c.DBDeletionProtection = 16, false
				c.LambdaDir, c.APICloudWatchRole = "out", false
				c.Admins = []string{"arn:aws:iam::1:user/a", "arn:aws:iam::1:role/b"}
				c.ReservedConcurrency[FunctionAPI] = 0
				c.S3SignalRules = `[{"bucket":"b","prefix":"p/","signal":"s"}]`
			},
		},
		{
			name: "json lists and objects",
			ctx: map[string]any{
				"maestro:admins": []any{"arn:aws:iam::1:user/a"}, "maestro:s3SignalBuckets": []any{"in", "out"},
				"maestro:s3SignalRules":           []any{map[string]any{"bucket": "in", "signal": "landed"}},
				"maestro:exampleSubscriberFilter": map[string]any{"type": []any{"STEP_INSTANCE_STATUS_CHANGE_EVENT"}},
			},
			want: func(c *Config) {
				c.Admins, c.S3SignalBuckets = []string{"arn:aws:iam::1:user/a"}, []string{"in", "out"}
				c.S3SignalRules = `[{"bucket":"in","signal":"landed"}]`
				c.ExampleSubscriberFilter = map[string]any{"type": []any{"STEP_INSTANCE_STATUS_CHANGE_EVENT"}}
			},
		},
		{
			name: "emulator target",
			ctx:  map[string]any{"maestro:target": "emulator", "maestro:emulatorDatabaseUrl": "postgres://u:p@127.0.0.1:5433/db", "maestro:lambdaArchitecture": "x86_64"},
			want: func(c *Config) {
				c.Target, c.EmulatorDatabaseURL, c.LambdaArchitecture = TargetEmulator, "postgres://u:p@127.0.0.1:5433/db", "x86_64"
			},
		},
		{name: "emulator without a database", ctx: map[string]any{"maestro:target": "emulator"}, wantErr: "emulatorDatabaseUrl"},
		{name: "unknown target", ctx: map[string]any{"maestro:target": "gcp"}, wantErr: `target "gcp"`},
		{name: "architecture", ctx: map[string]any{"maestro:lambdaArchitecture": "s390x"}, wantErr: "lambdaArchitecture"},
		{name: "negative concurrency", ctx: map[string]any{"maestro:signalsReservedConcurrency": -1.0}, wantErr: "signalsReservedConcurrency"},
		{name: "rules not json", ctx: map[string]any{"maestro:s3SignalRules": "{oops"}, wantErr: "s3SignalRules"},
		{name: "rule without signal", ctx: map[string]any{"maestro:s3SignalRules": `[{"bucket":"in"}]`}, wantErr: "signal is required"},
		{name: "max below desired", ctx: map[string]any{"maestro:engineMaxCount": 1.0}, wantErr: "engineMaxCount 1"},
		{name: "proxy share", ctx: map[string]any{"maestro:dbProxyMaxConnectionsPercent": 0.0}, wantErr: "dbProxyMaxConnectionsPercent"},
		{name: "not a number", ctx: map[string]any{"maestro:dbMaxCapacity": "lots"}, wantErr: "maestro:dbMaxCapacity"},
		{name: "not a boolean", ctx: map[string]any{"maestro:dbDeletionProtection": "maybe"}, wantErr: "maestro:dbDeletionProtection"},
		{name: "fractional count", ctx: map[string]any{"maestro:engineDesiredCount": 1.5}, wantErr: "whole number"},
		{name: "max below min", ctx: map[string]any{"maestro:dbMinCapacity": 8.0, "maestro:dbMaxCapacity": 4.0}, wantErr: "below dbMinCapacity"},
		{name: "capacity step", ctx: map[string]any{"maestro:dbMaxCapacity": 4.25}, wantErr: "steps of 0.5"},
		{name: "removal policy", ctx: map[string]any{"maestro:dbRemovalPolicy": "keep"}, wantErr: "dbRemovalPolicy"},
		{name: "retention", ctx: map[string]any{"maestro:logRetentionDays": 10.0}, wantErr: "logRetentionDays 10"},
		{name: "no flow groups", ctx: map[string]any{"maestro:groupCount": 0.0}, wantErr: "groupCount 0"},
		{name: "stage", ctx: map[string]any{"maestro:stage": "dev", "maestro:natGateways": "1", "maestro:vpcEndpoints": "true"},
			want: func(c *Config) { c.Stage, c.NatGateways, c.VpcEndpoints = "dev", 1, true }},
		{name: "stage with capitals", ctx: map[string]any{"maestro:stage": "Prod"}, wantErr: `stage "Prod"`},
		{name: "nat per az at most", ctx: map[string]any{"maestro:natGateways": 3.0}, wantErr: "natGateways 3"},
		{name: "empty lambda dir", ctx: map[string]any{"maestro:lambdaDir": " "}, wantErr: "lambdaDir"},
		{name: "otlp endpoint", ctx: map[string]any{"maestro:otlpEndpoint": "https://xray.eu-west-1.amazonaws.com/v1/traces"},
			want: func(c *Config) { c.OTLPEndpoint = "https://xray.eu-west-1.amazonaws.com/v1/traces" }},
		{name: "otlp endpoint not a url", ctx: map[string]any{"maestro:otlpEndpoint": "xray"}, wantErr: `otlpEndpoint "xray"`},
		{name: "x-ray otlp endpoint without its path", ctx: map[string]any{"maestro:otlpEndpoint": "https://xray.eu-west-1.amazonaws.com"},
			wantErr: "https://xray.eu-west-1.amazonaws.com/v1/traces"},
		{
			name: "step targets as lists and as -c strings",
			ctx: map[string]any{
				"maestro:stepLambdaFunctions": []any{"etl", "arn:aws:lambda:eu-west-1:123456789012:function:load"},
				"maestro:stepEcsClusters":     "jobs", "maestro:stepEcsTaskDefinitions": "trainer, scorer:4",
				"maestro:stepPassRoles": []any{"trainer-task"},
			},
			want: func(c *Config) {
				c.StepTargets = StepTargets{LambdaFunctions: []string{"etl", "arn:aws:lambda:eu-west-1:123456789012:function:load"},
					EcsClusters: []string{"jobs"}, EcsTaskDefinitions: []string{"trainer", "scorer:4"}, PassRoles: []string{"trainer-task"}}
			},
		},
		{
			name: "Batch, Emr and Notebook step targets",
			ctx: map[string]any{
				"maestro:stepBatchJobQueues": "etl-queue", "maestro:stepBatchJobDefinitions": []any{"etl", "papermill:2"},
				"maestro:stepEmrClusters": "j-1ABC", "maestro:stepNotebookCarrier": "Batch", "maestro:stepNotebookDefinition": "papermill:2",
				"maestro:stepNotebookOutputPrefix": "s3://notebooks/out/",
			},
			want: func(c *Config) {
				c.StepTargets = StepTargets{Jobs: JobTargets{BatchJobQueues: []string{"etl-queue"}, BatchJobDefinitions: []string{"etl", "papermill:2"},
					EmrClusters: []string{"j-1ABC"}, NotebookCarrier: "Batch", NotebookDefinition: "papermill:2", NotebookOutputPrefix: "s3://notebooks/out/"}}
			},
		},
		{name: "Batch queue without definitions", ctx: map[string]any{"maestro:stepBatchJobQueues": "q"}, wantErr: "Batch steps need both"},
		{name: "EMR cluster not an id", ctx: map[string]any{"maestro:stepEmrClusters": "analytics"}, wantErr: `"analytics" is not a cluster id`},
		{name: "notebook definition not a target", ctx: map[string]any{"maestro:stepBatchJobQueues": "q", "maestro:stepBatchJobDefinitions": "etl",
			"maestro:stepNotebookCarrier": "Batch", "maestro:stepNotebookDefinition": "papermill", "maestro:stepNotebookOutputPrefix": "s3://b/"},
			wantErr: `stepNotebookDefinition "papermill"`},
		{name: "notebook output not on S3", ctx: map[string]any{"maestro:stepEcsClusters": "c", "maestro:stepEcsTaskDefinitions": "papermill",
			"maestro:stepNotebookCarrier": "EcsTask", "maestro:stepNotebookDefinition": "papermill", "maestro:stepNotebookOutputPrefix": "/tmp/out"},
			wantErr: "stepNotebookOutputPrefix"},
		{
			name: "step network, http hosts, cluster name and public url",
			ctx: map[string]any{
				"maestro:stepEcsClusters": "jobs", "maestro:stepEcsTaskDefinitions": "trainer",
				"maestro:stepEcsSubnets": "subnet-1,subnet-2", "maestro:stepEcsSecurityGroups": []any{"sg-1"},
				"maestro:stepHttpAllowedHosts": "api.example.com, *.example.org",
				"maestro:clusterName":          "blue", "maestro:publicUrl": "https://maestro.example.com/",
			},
			want: func(c *Config) {
				c.StepTargets = StepTargets{EcsClusters: []string{"jobs"}, EcsTaskDefinitions: []string{"trainer"},
					EcsSubnets: []string{"subnet-1", "subnet-2"}, EcsSecurityGroups: []string{"sg-1"},
					HTTPAllowedHosts: []string{"api.example.com", "*.example.org"}}
				c.ClusterName, c.PublicURL = "blue", "https://maestro.example.com/"
			},
		},
		{
			name: "filter policy with conditions and $or",
			ctx: map[string]any{"maestro:exampleSubscriberFilter": `{"$or":[{"workflow_id":[{"prefix":"sales."}]},` +
				`{"type":["WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT"],"status":["FAILED"]}]}`},
			want: func(c *Config) {
				c.ExampleSubscriberFilter = map[string]any{"$or": []any{
					map[string]any{"workflow_id": []any{map[string]any{"prefix": "sales."}}},
					map[string]any{"type": []any{"WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT"}, "status": []any{"FAILED"}},
				}}
			},
		},
		{name: "filter on an attribute never set", ctx: map[string]any{"maestro:exampleSubscriberFilter": `{"event_type":["X"]}`},
			wantErr: `"event_type" is not a message attribute`},
		{name: "filter value not a list", ctx: map[string]any{"maestro:exampleSubscriberFilter": `{"type":"X"}`}, wantErr: "want a list"},
		{name: "filter $or not a list", ctx: map[string]any{"maestro:exampleSubscriberFilter": `{"$or":{"type":["X"]}}`}, wantErr: "$or"},
		{name: "empty cluster name", ctx: map[string]any{"maestro:clusterName": " "}, wantErr: "clusterName"},
		{name: "public url", ctx: map[string]any{"maestro:publicUrl": "maestro.example.com"}, wantErr: "publicUrl"},
		{name: "step network without a cluster", ctx: map[string]any{"maestro:stepEcsSubnets": "subnet-1"}, wantErr: "set stepEcsClusters"},
		{name: "subnet id", ctx: map[string]any{"maestro:stepEcsClusters": "jobs", "maestro:stepEcsTaskDefinitions": "t",
			"maestro:stepEcsSubnets": "private-a"}, wantErr: "not a subnet id"},
		{name: "security group id", ctx: map[string]any{"maestro:stepEcsClusters": "jobs", "maestro:stepEcsTaskDefinitions": "t",
			"maestro:stepEcsSecurityGroups": "engine"}, wantErr: "not a security group id"},
		{name: "task definitions without a cluster", ctx: map[string]any{"maestro:stepEcsTaskDefinitions": "trainer"}, wantErr: "need stepEcsClusters"},
		{name: "step targets not strings", ctx: map[string]any{"maestro:stepLambdaFunctions": []any{1.0}}, wantErr: "maestro:stepLambdaFunctions"},
		{name: "malformed ARN", ctx: map[string]any{"maestro:stepLambdaFunctions": "arn:aws:lambda"}, wantErr: "not an ARN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ConfigFromContext(func(key string) any { return tt.ctx[key] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := DefaultConfig()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestCDKJSON checks the repository's cdk.json: it runs this package, and its
// maestro:* keys are exactly the defaults, so that the file documents them.
func TestCDKJSON(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		App     string         `json:"app"`
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.App != "go run ./infra" {
		t.Errorf("app = %q, want %q", doc.App, "go run ./infra")
	}
	got, err := ConfigFromContext(func(key string) any { return doc.Context[key] })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, DefaultConfig()) {
		t.Errorf("cdk.json config = %+v\nwant defaults %+v", got, DefaultConfig())
	}
	keys := 0
	for k := range doc.Context {
		if strings.HasPrefix(k, ContextPrefix) {
			keys++
		}
	}
	// Every key but emulatorDatabaseUrl, which only the emulator target
	// reads; 6 of them are the AWS job steps' targets, 6 the Batch, Emr and
	// Notebook steps', 5 the table-change sources and Iceberg catalog.
	if keys != 59 {
		t.Errorf("cdk.json sets %d maestro:* keys, want all 59", keys)
	}
	if v := doc.Context["@aws-cdk/core:defaultCrossStackReferences"]; v != "strong" {
		t.Errorf("cross-stack references = %v, want strong (Fn::ImportValue)", v)
	}
}
