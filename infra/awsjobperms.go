package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// AWSJobTargets are the resources the engine's AWS job steps (Athena,
// Glue, StepFunctions; docs/step-runtimes.md, "AWS jobs") may use. The
// engine task role gets exactly what they need (AWSJobStatements), and
// nothing when they are empty. Names resolve in the deployment's account
// and region; ARNs are kept as given.
type AWSJobTargets struct {
	// AthenaWorkgroups are the workgroups Athena steps run queries in.
	// Context key maestro:stepAthenaWorkgroups.
	AthenaWorkgroups []string
	// AthenaOutputLocations are where those queries write their results
	// (s3://bucket/prefix/). Context key maestro:stepAthenaOutputLocations.
	AthenaOutputLocations []string
	// AthenaDataLocations are the S3 locations the queries read
	// (s3://bucket/prefix/). Context key maestro:stepAthenaDataLocations.
	AthenaDataLocations []string
	// AthenaDatabases are the Glue Data Catalog databases the queries
	// read. Context key maestro:stepAthenaDatabases.
	AthenaDatabases []string
	// GlueJobs are the Glue jobs Glue steps run. Context key
	// maestro:stepGlueJobs.
	GlueJobs []string
	// StateMachines are the Step Functions state machines StepFunctions
	// steps execute (any version or alias of each). Context key
	// maestro:stepStateMachines.
	StateMachines []string
}

// readAWSJobTargets reads the AWSJobTargets keys with list, the reader of
// stepTargetsFromContext.
func readAWSJobTargets(list func(key string, dst *[]string)) AWSJobTargets {
	var t AWSJobTargets
	list("stepAthenaWorkgroups", &t.AthenaWorkgroups)
	list("stepAthenaOutputLocations", &t.AthenaOutputLocations)
	list("stepAthenaDataLocations", &t.AthenaDataLocations)
	list("stepAthenaDatabases", &t.AthenaDatabases)
	list("stepGlueJobs", &t.GlueJobs)
	list("stepStateMachines", &t.StateMachines)
	return t
}

// Any reports whether any AWS job step has a target.
func (t AWSJobTargets) Any() bool {
	return len(t.AthenaWorkgroups)+len(t.GlueJobs)+len(t.StateMachines) > 0
}

// Validate reports targets that cannot work.
func (t AWSJobTargets) Validate() error {
	var errs []error
	athena := len(t.AthenaOutputLocations) + len(t.AthenaDataLocations) + len(t.AthenaDatabases)
	if athena > 0 && len(t.AthenaWorkgroups) == 0 {
		errs = append(errs, errors.New("stepAthenaOutputLocations, stepAthenaDataLocations, stepAthenaDatabases: for Athena steps; set stepAthenaWorkgroups too"))
	}
	for _, l := range append(append([]string{}, t.AthenaOutputLocations...), t.AthenaDataLocations...) {
		if _, _, err := s3Location(l); err != nil {
			errs = append(errs, err)
		}
	}
	for _, sm := range t.StateMachines {
		if strings.HasPrefix(sm, "arn:") && !strings.Contains(sm, ":stateMachine:") {
			errs = append(errs, fmt.Errorf("stepStateMachines: %q is not a state machine ARN", sm))
		}
	}
	return errors.Join(errs...)
}

// s3Location splits s3://bucket/prefix.
func s3Location(l string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(l, "s3://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" || strings.Contains(bucket, "*") || strings.Contains(prefix, "*") {
		return "", "", fmt.Errorf("%q is not an S3 location (s3://bucket/prefix/, no wildcards)", l)
	}
	return bucket, prefix, nil
}

// AWSJobStatements are the engine task role's permissions for the AWS job
// targets:
//   - Athena: starting, reading, listing and stopping queries in the
//     workgroups; writing results under the output locations and reading
//     the data locations; reading the databases' tables in the Data
//     Catalog (what the queries themselves need, made with the caller's
//     permissions);
//   - Glue: starting, reading and stopping runs of the jobs;
//   - Step Functions: starting executions of the state machines (their
//     versions and aliases too), describing and stopping them.
//
// None of these calls passes a role (a Glue job and a state machine carry
// their own), so no iam:PassRole is granted for them.
func AWSJobStatements(stack awscdk.Stack, t AWSJobTargets) []awsiam.PolicyStatement {
	arn := func(ref, service, resource, name string, format awscdk.ArnFormat) string {
		if strings.HasPrefix(ref, "arn:") {
			return ref
		}
		c := &awscdk.ArnComponents{Service: jsii.String(service), Resource: jsii.String(resource), ArnFormat: format}
		if name != "" {
			c.ResourceName = jsii.String(name)
		}
		return *stack.FormatArn(c)
	}
	var out []awsiam.PolicyStatement
	if len(t.AthenaWorkgroups) > 0 {
		var wgs []string
		for _, w := range t.AthenaWorkgroups {
			wgs = append(wgs, arn(w, "athena", "workgroup", w, awscdk.ArnFormat_SLASH_RESOURCE_NAME))
		}
		out = append(out, statement("RunStepAthenaQueries", []string{"athena:StartQueryExecution", "athena:GetQueryExecution",
			"athena:GetQueryResults", "athena:StopQueryExecution", "athena:ListQueryExecutions", "athena:BatchGetQueryExecution"}, wgs, nil))
		s3 := func(sid string, actions []string, locations []string) {
			var buckets, objects []string
			for _, l := range locations {
				b, p, err := s3Location(l)
				if err != nil {
					continue // Validate reports it
				}
				buckets = append(buckets, *stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("s3"), Resource: jsii.String(b),
					Region: jsii.String(""), Account: jsii.String("")}))
				objects = append(objects, *stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("s3"), Resource: jsii.String(b),
					ResourceName: jsii.String(p + "*"), Region: jsii.String(""), Account: jsii.String(""), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME}))
			}
			if len(objects) == 0 {
				return
			}
			out = append(out, statement(sid+"Objects", actions, objects, nil),
				statement(sid+"Buckets", []string{"s3:GetBucketLocation", "s3:ListBucket"}, buckets, nil))
		}
		s3("WriteStepAthenaResults", []string{"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"}, t.AthenaOutputLocations)
		s3("ReadStepAthenaData", []string{"s3:GetObject"}, t.AthenaDataLocations)
		if len(t.AthenaDatabases) > 0 {
			res := []string{arn("", "glue", "catalog", "", awscdk.ArnFormat_NO_RESOURCE_NAME)}
			for _, d := range t.AthenaDatabases {
				res = append(res, arn("", "glue", "database", d, awscdk.ArnFormat_SLASH_RESOURCE_NAME),
					arn("", "glue", "table", d+"/*", awscdk.ArnFormat_SLASH_RESOURCE_NAME))
			}
			out = append(out, statement("ReadStepAthenaCatalog", []string{"glue:GetDatabase", "glue:GetTable", "glue:GetTables",
				"glue:GetPartition", "glue:GetPartitions", "glue:BatchGetPartition"}, res, nil))
		}
	}
	if len(t.GlueJobs) > 0 {
		var jobs []string
		for _, j := range t.GlueJobs {
			jobs = append(jobs, arn(j, "glue", "job", j, awscdk.ArnFormat_SLASH_RESOURCE_NAME))
		}
		out = append(out, statement("RunStepGlueJobs", []string{"glue:StartJobRun", "glue:GetJobRun", "glue:GetJobRuns", "glue:BatchStopJobRun"}, jobs, nil))
	}
	if len(t.StateMachines) > 0 {
		var machines, executions []string
		for _, sm := range t.StateMachines {
			a := arn(sm, "states", "stateMachine", sm, awscdk.ArnFormat_COLON_RESOURCE_NAME)
			machines = append(machines, a, a+":*")
			name := sm[strings.LastIndex(sm, ":")+1:]
			if strings.HasPrefix(sm, "arn:") {
				executions = append(executions, strings.Replace(sm, ":stateMachine:", ":execution:", 1)+":*")
			} else {
				executions = append(executions, arn("", "states", "execution", name+":*", awscdk.ArnFormat_COLON_RESOURCE_NAME))
			}
		}
		out = append(out,
			statement("StartStepExecutions", []string{"states:StartExecution"}, machines, nil),
			statement("WatchStepExecutions", []string{"states:DescribeExecution", "states:StopExecution"}, executions, nil))
	}
	return out
}

// nagAcceptAWSJobs records why the AWS job statements' wildcards are
// needed.
func nagAcceptAWSJobs(role constructs.IConstruct, t AWSJobTargets) {
	if !t.Any() {
		return
	}
	nagSuppress(role, "AwsSolutions-IAM5", "AWS job steps (AWSJobStatements): objects under an Athena step's result and data prefixes (<bucket>/<prefix>*), "+
		"the tables of its catalog databases (table/<db>/*), a step state machine's versions and aliases (<machine>:*) and its executions (execution:<machine>:*)",
		`/^Resource::.*:s3:::[^*]+\*$/`, `/^Resource::.*:table\/[^/*]+\/\*$/`, `/^Resource::.*:stateMachine:[^:*]+:\*$/`, `/^Resource::.*:execution:[^:*]+:\*$/`)
}
