package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// JobTargets are the AWS Batch queues and job definitions, EMR clusters
// and the notebook carrier the engine's Batch, Emr and Notebook steps use
// ([aws-steps] part B). The engine task role gets exactly what they need
// (JobStatements), nothing when they are empty; each entry is an ARN or a
// name (a cluster id for EMR) in the deployment's account and region.
// Batch and Emr steps pass no role: a job runs as its job definition's
// role, an EMR step as the cluster's.
type JobTargets struct {
	// BatchJobQueues are the queues Batch steps submit to; the first is
	// the default (MAESTRO_BATCH_JOB_QUEUE). Context key
	// maestro:stepBatchJobQueues.
	BatchJobQueues []string
	// BatchJobDefinitions are the job definitions they run: a name (every
	// revision) or name:revision. Context key
	// maestro:stepBatchJobDefinitions.
	BatchJobDefinitions []string
	// EmrClusters are the clusters (j-...) Emr steps add steps to; the
	// first is the default (MAESTRO_EMR_CLUSTER_ID). Context key
	// maestro:stepEmrClusters.
	EmrClusters []string
	// NotebookCarrier (Batch or EcsTask), NotebookDefinition (the Batch
	// job definition or the ECS task definition that has papermill, one of
	// the targets above) and NotebookOutputPrefix (s3://bucket/prefix/, the
	// engine may read the output notebooks under it) configure Notebook
	// steps. Context keys maestro:stepNotebookCarrier,
	// maestro:stepNotebookDefinition, maestro:stepNotebookOutputPrefix.
	NotebookCarrier      string
	NotebookDefinition   string
	NotebookOutputPrefix string
}

// jobTargetsFromContext reads the JobTargets keys with list, the reader of
// list keys, and get.
func jobTargetsFromContext(get func(key string) any, list func(key string, dst *[]string)) JobTargets {
	var t JobTargets
	list("stepBatchJobQueues", &t.BatchJobQueues)
	list("stepBatchJobDefinitions", &t.BatchJobDefinitions)
	list("stepEmrClusters", &t.EmrClusters)
	str := func(key string) string {
		s, _ := deref(get(ContextPrefix + key)).(string)
		return strings.TrimSpace(s)
	}
	t.NotebookCarrier = str("stepNotebookCarrier")
	t.NotebookDefinition = str("stepNotebookDefinition")
	t.NotebookOutputPrefix = str("stepNotebookOutputPrefix")
	return t
}

// Validate reports targets that cannot work together.
func (t JobTargets) Validate(ecsDefinitions []string) error {
	var errs []error
	if (len(t.BatchJobQueues) == 0) != (len(t.BatchJobDefinitions) == 0) {
		errs = append(errs, errors.New("stepBatchJobQueues, stepBatchJobDefinitions: Batch steps need both a queue and a job definition"))
	}
	for _, c := range t.EmrClusters {
		if !strings.HasPrefix(c, "j-") && !strings.HasPrefix(c, "arn:") {
			errs = append(errs, fmt.Errorf("stepEmrClusters: %q is not a cluster id (j-...)", c))
		}
	}
	if t.NotebookCarrier == "" && (t.NotebookDefinition != "" || t.NotebookOutputPrefix != "") {
		errs = append(errs, errors.New("stepNotebookDefinition, stepNotebookOutputPrefix: set stepNotebookCarrier (Batch or EcsTask) too"))
	}
	if t.NotebookCarrier != "" {
		var defs []string
		switch t.NotebookCarrier {
		case "Batch":
			defs = t.BatchJobDefinitions
		case "EcsTask":
			defs = ecsDefinitions
		default:
			errs = append(errs, fmt.Errorf("stepNotebookCarrier %q: want Batch or EcsTask", t.NotebookCarrier))
		}
		if t.NotebookDefinition == "" || !containsDefinition(defs, t.NotebookDefinition) {
			errs = append(errs, fmt.Errorf("stepNotebookDefinition %q: name one of the carrier's definitions (%s)", t.NotebookDefinition, strings.Join(defs, ", ")))
		}
		if u, err := url.Parse(t.NotebookOutputPrefix); err != nil || u.Scheme != "s3" || u.Host == "" {
			errs = append(errs, fmt.Errorf("stepNotebookOutputPrefix %q: want s3://bucket/prefix/", t.NotebookOutputPrefix))
		}
	}
	return errors.Join(errs...)
}

// containsDefinition reports whether def (name or name:revision) is among
// defs (names cover every revision).
func containsDefinition(defs []string, def string) bool {
	name, _, _ := strings.Cut(def, ":")
	for _, d := range defs {
		if d == def || d == name {
			return true
		}
	}
	return false
}

// JobStatements are the engine task role's permissions for the job
// targets, names resolved in stack's account and region:
//   - batch:SubmitJob on the queues and job definitions (SubmitJob is
//     authorized on both), and batch:TagResource on new jobs only
//     (batch:CreateAction SubmitJob: the job's tags name its attempt);
//   - batch:TerminateJob on jobs; batch:DescribeJobs and batch:ListJobs,
//     which take no resource;
//   - elasticmapreduce:AddJobFlowSteps, DescribeStep, ListSteps and
//     CancelSteps on the clusters;
//   - s3:GetObject under the notebook output prefix.
func JobStatements(stack awscdk.Stack, t JobTargets) []awsiam.PolicyStatement {
	arn := func(ref, service, resource string) string {
		if strings.HasPrefix(ref, "arn:") {
			return ref
		}
		return *stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String(service), Resource: jsii.String(resource),
			ResourceName: jsii.String(ref), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME})
	}
	var out []awsiam.PolicyStatement
	if len(t.BatchJobQueues) > 0 && len(t.BatchJobDefinitions) > 0 {
		var submit []string
		for _, q := range t.BatchJobQueues {
			submit = append(submit, arn(q, "batch", "job-queue"))
		}
		for _, d := range t.BatchJobDefinitions {
			if !strings.HasPrefix(d, "arn:") && !strings.Contains(d, ":") {
				d += ":*"
			}
			submit = append(submit, arn(d, "batch", "job-definition"))
		}
		jobs := arn("*", "batch", "job")
		out = append(out,
			statement("SubmitStepJobs", []string{"batch:SubmitJob"}, submit, nil),
			statement("TagStepJobs", []string{"batch:TagResource"}, []string{jobs},
				map[string]any{"StringEquals": map[string]any{"batch:CreateAction": "SubmitJob"}}),
			statement("StopStepJobs", []string{"batch:TerminateJob"}, []string{jobs}, nil),
			statement("WatchStepJobs", []string{"batch:DescribeJobs", "batch:ListJobs"}, []string{"*"}, nil),
		)
	}
	if len(t.EmrClusters) > 0 {
		var clusters []string
		for _, c := range t.EmrClusters {
			clusters = append(clusters, arn(c, "elasticmapreduce", "cluster"))
		}
		out = append(out, statement("RunEmrSteps", []string{"elasticmapreduce:AddJobFlowSteps", "elasticmapreduce:DescribeStep",
			"elasticmapreduce:ListSteps", "elasticmapreduce:CancelSteps"}, clusters, nil))
	}
	if u, err := url.Parse(t.NotebookOutputPrefix); t.NotebookCarrier != "" && err == nil && u.Host != "" {
		prefix := strings.TrimPrefix(u.Path, "/")
		out = append(out, statement("ReadNotebookOutputs", []string{"s3:GetObject"},
			[]string{fmt.Sprintf("arn:%s:s3:::%s/%s*", *awscdk.Aws_PARTITION(), u.Host, prefix)}, nil))
	}
	return out
}

// JobEnvironment adds the engine's settings for the job targets to env.
func JobEnvironment(t JobTargets, env map[string]*string) {
	if len(t.BatchJobQueues) > 0 {
		env["MAESTRO_BATCH_JOB_QUEUE"] = jsii.String(t.BatchJobQueues[0])
	}
	if len(t.EmrClusters) > 0 {
		env["MAESTRO_EMR_CLUSTER_ID"] = jsii.String(t.EmrClusters[0])
	}
	if t.NotebookCarrier == "" {
		return
	}
	env["MAESTRO_NOTEBOOK_CARRIER"] = jsii.String(t.NotebookCarrier)
	env["MAESTRO_NOTEBOOK_OUTPUT_PREFIX"] = jsii.String(t.NotebookOutputPrefix)
	if t.NotebookCarrier == "Batch" {
		env["MAESTRO_NOTEBOOK_JOB_DEFINITION"] = jsii.String(t.NotebookDefinition)
	} else {
		env["MAESTRO_NOTEBOOK_TASK_DEFINITION"] = jsii.String(t.NotebookDefinition)
	}
}

// jobNagSuppressions records why the job statements' wildcards are
// accepted.
func jobNagSuppressions(role constructs.IConstruct, t JobTargets) {
	if len(t.BatchJobQueues) == 0 && t.NotebookCarrier == "" {
		return
	}
	nagSuppress(role, "AwsSolutions-IAM5", "Batch and notebook step targets (JobStatements): every revision of a step job definition "+
		"(<name>:*), the jobs Batch creates (job/*: their ids are not known before SubmitJob; tagging only at SubmitJob), "+
		"batch:DescribeJobs and batch:ListJobs, which take no resource, and the notebook output prefix (<bucket>/<prefix>*)",
		`/^Resource::.*:job-definition\/[^:*]+:\*$/`, `/^Resource::.*:job\/\*$/`, `/^Resource::\*$/`, `/^Resource::arn:.*:s3:::.*\*$/`)
}
