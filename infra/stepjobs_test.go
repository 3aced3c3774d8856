package main

import (
	"strings"
	"testing"
)

// The Batch, Emr and Notebook steps' permissions: only on the configured
// queues, job definitions and clusters, tagging only at SubmitJob, no
// wildcard action, no iam:PassRole; the engine's defaults follow the
// targets. Not parallel (jsii).
func TestJobStatements(t *testing.T) {
	if got := policyOf(t, StepTargets{Jobs: JobTargets{}}); len(got) != 0 {
		t.Fatalf("no job targets, yet the role may %s", asJSON(got))
	}
	got := policyOf(t, StepTargets{Jobs: JobTargets{BatchJobQueues: []string{"etl-queue"}, BatchJobDefinitions: []string{"etl", "papermill:2"},
		EmrClusters:     []string{"j-1ABC", "arn:aws:elasticmapreduce:eu-west-1:123456789012:cluster/j-2DEF"},
		NotebookCarrier: "Batch", NotebookDefinition: "papermill:2", NotebookOutputPrefix: "s3://notebooks/out/"}})
	local := func(rest string) any {
		return map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, rest}}}
	}
	want := map[string]map[string]any{
		"SubmitStepJobs": {"Action": "batch:SubmitJob", "Resource": []any{local(":batch:eu-west-1:123456789012:job-queue/etl-queue"),
			local(":batch:eu-west-1:123456789012:job-definition/etl:*"), local(":batch:eu-west-1:123456789012:job-definition/papermill:2")}},
		"TagStepJobs": {"Action": "batch:TagResource", "Resource": local(":batch:eu-west-1:123456789012:job/*"),
			"Condition": map[string]any{"StringEquals": map[string]any{"batch:CreateAction": "SubmitJob"}}},
		"StopStepJobs":  {"Action": "batch:TerminateJob", "Resource": local(":batch:eu-west-1:123456789012:job/*")},
		"WatchStepJobs": {"Action": []any{"batch:DescribeJobs", "batch:ListJobs"}, "Resource": "*"},
		"RunEmrSteps": {"Action": []any{"elasticmapreduce:AddJobFlowSteps", "elasticmapreduce:DescribeStep", "elasticmapreduce:ListSteps",
			"elasticmapreduce:CancelSteps"}, "Resource": []any{local(":elasticmapreduce:eu-west-1:123456789012:cluster/j-1ABC"),
			"arn:aws:elasticmapreduce:eu-west-1:123456789012:cluster/j-2DEF"}},
		"ReadNotebookOutputs": {"Action": "s3:GetObject", "Resource": local(":s3:::notebooks/out/*")},
	}
	if len(got) != len(want) {
		t.Errorf("%d statements, want %d: %s", len(got), len(want), asJSON(got))
	}
	for _, st := range got {
		sid, _ := st["Sid"].(string)
		w, ok := want[sid]
		if !ok {
			t.Errorf("unexpected statement %s", asJSON(st))
			continue
		}
		for k, v := range w {
			if asJSON(st[k]) != asJSON(v) {
				t.Errorf("%s.%s = %s, want %s", sid, k, asJSON(st[k]), asJSON(v))
			}
		}
		if strings.Contains(asJSON(st["Action"]), "*") || strings.Contains(asJSON(st["Action"]), "PassRole") {
			t.Errorf("%s grants %s", sid, asJSON(st["Action"]))
		}
	}
	if got := policyOf(t, StepTargets{Jobs: JobTargets{EmrClusters: []string{"j-1ABC"}}}); len(got) != 1 || got[0]["Sid"] != "RunEmrSteps" {
		t.Errorf("EMR only: statements %s", asJSON(got))
	}

	_, env := engineEnvStack(t, StepTargets{Jobs: JobTargets{BatchJobQueues: []string{"etl-queue", "gpu-queue"}, BatchJobDefinitions: []string{"papermill"},
		EmrClusters: []string{"j-1ABC"}, NotebookCarrier: "Batch", NotebookDefinition: "papermill", NotebookOutputPrefix: "s3://nb/out/"}}, "https://x")
	for k, v := range map[string]string{"MAESTRO_BATCH_JOB_QUEUE": "etl-queue", "MAESTRO_EMR_CLUSTER_ID": "j-1ABC", "MAESTRO_NOTEBOOK_CARRIER": "Batch",
		"MAESTRO_NOTEBOOK_JOB_DEFINITION": "papermill", "MAESTRO_NOTEBOOK_OUTPUT_PREFIX": "s3://nb/out/"} {
		if env[k] != v {
			t.Errorf("%s = %v, want %s", k, env[k], v)
		}
	}
}
