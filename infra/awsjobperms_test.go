package main

import (
	"strings"
	"testing"
)

// Not parallel: jsii (see TestStepRuntimeStatements).
func TestAWSJobStatements(t *testing.T) {
	got := policyOf(t, StepTargets{AWSJobs: AWSJobTargets{
		AthenaWorkgroups: []string{"analytics"}, AthenaOutputLocations: []string{"s3://results/maestro/"},
		AthenaDataLocations: []string{"s3://lake/events/"}, AthenaDatabases: []string{"events"},
		GlueJobs:      []string{"nightly", "arn:aws:glue:us-east-1:210987654321:job/shared"},
		StateMachines: []string{"publish", "arn:aws:states:us-east-1:210987654321:stateMachine:shared"},
	}})
	local := func(rest string) any {
		return map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, rest}}}
	}
	want := map[string]map[string]any{
		"RunStepAthenaQueries": {"Action": []any{"athena:StartQueryExecution", "athena:GetQueryExecution", "athena:GetQueryResults",
			"athena:StopQueryExecution", "athena:ListQueryExecutions", "athena:BatchGetQueryExecution"},
			"Resource": local(":athena:eu-west-1:123456789012:workgroup/analytics")},
		"WriteStepAthenaResultsObjects": {"Action": []any{"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"},
			"Resource": local(":s3:::results/maestro/*")},
		"WriteStepAthenaResultsBuckets": {"Action": []any{"s3:GetBucketLocation", "s3:ListBucket"}, "Resource": local(":s3:::results")},
		"ReadStepAthenaDataObjects":     {"Action": "s3:GetObject", "Resource": local(":s3:::lake/events/*")},
		"ReadStepAthenaDataBuckets":     {"Action": []any{"s3:GetBucketLocation", "s3:ListBucket"}, "Resource": local(":s3:::lake")},
		"ReadStepAthenaCatalog": {"Action": []any{"glue:GetDatabase", "glue:GetTable", "glue:GetTables", "glue:GetPartition",
			"glue:GetPartitions", "glue:BatchGetPartition"},
			"Resource": []any{local(":glue:eu-west-1:123456789012:catalog"), local(":glue:eu-west-1:123456789012:database/events"),
				local(":glue:eu-west-1:123456789012:table/events/*")}},
		"RunStepGlueJobs": {"Action": []any{"glue:StartJobRun", "glue:GetJobRun", "glue:GetJobRuns", "glue:BatchStopJobRun"},
			"Resource": []any{local(":glue:eu-west-1:123456789012:job/nightly"), "arn:aws:glue:us-east-1:210987654321:job/shared"}},
		"StartStepExecutions": {"Action": "states:StartExecution",
			"Resource": []any{local(":states:eu-west-1:123456789012:stateMachine:publish"), local(":states:eu-west-1:123456789012:stateMachine:publish:*"),
				"arn:aws:states:us-east-1:210987654321:stateMachine:shared", "arn:aws:states:us-east-1:210987654321:stateMachine:shared:*"}},
		"WatchStepExecutions": {"Action": []any{"states:DescribeExecution", "states:StopExecution"},
			"Resource": []any{local(":states:eu-west-1:123456789012:execution:publish:*"), "arn:aws:states:us-east-1:210987654321:execution:shared:*"}},
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
		if strings.Contains(asJSON(st["Action"]), "*") || strings.Contains(asJSON(st), "iam:PassRole") {
			t.Errorf("%s grants a wildcard action or a role pass: %s", sid, asJSON(st["Action"]))
		}
	}
	if got := policyOf(t, StepTargets{AWSJobs: AWSJobTargets{GlueJobs: []string{"nightly"}}}); len(got) != 1 || got[0]["Sid"] != "RunStepGlueJobs" {
		t.Errorf("Glue only: statements %s", asJSON(got))
	}
}

func TestAWSJobTargetsFromContext(t *testing.T) {
	ctx := map[string]any{ContextPrefix + "stepAthenaWorkgroups": "analytics, adhoc", ContextPrefix + "stepGlueJobs": []any{"nightly"},
		ContextPrefix + "stepStateMachines": "publish", ContextPrefix + "stepAthenaOutputLocations": "s3://results/maestro/"}
	got, err := stepTargetsFromContext(func(k string) any { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	j := got.AWSJobs
	if strings.Join(j.AthenaWorkgroups, ",") != "analytics,adhoc" || j.GlueJobs[0] != "nightly" || j.StateMachines[0] != "publish" ||
		j.AthenaOutputLocations[0] != "s3://results/maestro/" || got.Validate() != nil {
		t.Fatalf("targets %+v (%v)", j, got.Validate())
	}
	for _, c := range []struct {
		t    AWSJobTargets
		want string
	}{
		{AWSJobTargets{AthenaOutputLocations: []string{"s3://results/"}}, "set stepAthenaWorkgroups"},
		{AWSJobTargets{AthenaWorkgroups: []string{"w"}, AthenaDataLocations: []string{"lake/events"}}, "not an S3 location"},
		{AWSJobTargets{AthenaWorkgroups: []string{"w"}, AthenaDataLocations: []string{"s3://lake/*"}}, "no wildcards"},
		{AWSJobTargets{StateMachines: []string{"arn:aws:states:us-east-1:1:activity:x"}}, "not a state machine ARN"},
	} {
		if err := (StepTargets{AWSJobs: c.t}).Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.t, err, c.want)
		}
	}
}

// eventRules synthesizes the engine stack with targets and checks that it
// tells the engine of the events queue and has n rules whose event
// patterns hold every wanted fragment.
func eventRules(t *testing.T, targets StepTargets, n int, want ...string) *stackTemplate {
	t.Helper()
	tmpl, env := engineEnvStack(t, targets, "")
	if env[AWSJobEventsQueueEnv] == nil {
		t.Fatalf("engine environment %s lacks %s", asJSON(env), AWSJobEventsQueueEnv)
	}
	rules := tmpl.ofType("AWS::Events::Rule")
	if len(rules) != n {
		t.Fatalf("%d rules, want %d: %s", len(rules), n, asJSON(rules))
	}
	var patterns []string
	for _, r := range rules {
		patterns = append(patterns, asJSON(props(r)["EventPattern"]))
	}
	all := strings.Join(patterns, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("event patterns lack %s:\n%s", w, all)
		}
	}
	return tmpl
}

// With AWS job targets the engine stack routes their services' events to
// a queue the engine reads (and is told of), and alarms its dead letters.
func TestAWSJobEventsQueue(t *testing.T) {
	tmpl := eventRules(t, StepTargets{AWSJobs: AWSJobTargets{AthenaWorkgroups: []string{"analytics"},
		GlueJobs: []string{"nightly"}, StateMachines: []string{"publish"}}}, 3,
		`"workgroupName":["analytics"]`, `"jobName":["nightly"]`, `stateMachine:publish`,
		`"Athena Query State Change"`, `"Glue Job State Change"`, `"Step Functions Execution Status Change"`)
	if policies := asJSON(tmpl.ofType("AWS::IAM::Policy")); !strings.Contains(policies, "sqs:ReceiveMessage") || !strings.Contains(policies, "sqs:DeleteMessage") {
		t.Errorf("the task role may not consume the events queue: %s", policies)
	}
	if _, env := engineEnvStack(t, StepTargets{}, ""); env[AWSJobEventsQueueEnv] != nil {
		t.Errorf("no AWS job targets, yet %s is set", AWSJobEventsQueueEnv)
	}
}

// Batch and Emr steps are AWS jobs too: their job queues' and clusters'
// state-change events (the ends only) reach the same queue, and they alone
// make the engine read it.
func TestBatchAndEmrEventRules(t *testing.T) {
	eventRules(t, StepTargets{Jobs: JobTargets{BatchJobQueues: []string{"etl", "arn:aws:batch:eu-west-1:123456789012:job-queue/ml"},
		BatchJobDefinitions: []string{"etl"}, EmrClusters: []string{"j-2AXXXXXXGAPLF"}}}, 2,
		`"source":["aws.batch"]`, `"detail-type":["Batch Job State Change"]`, `:job-queue/etl`,
		`"arn:aws:batch:eu-west-1:123456789012:job-queue/ml"`, `"status":["SUCCEEDED","FAILED"]`,
		`"source":["aws.emr"]`, `"detail-type":["EMR Step Status Change"]`, `"clusterId":["j-2AXXXXXXGAPLF"]`,
		`"state":["COMPLETED","FAILED","CANCELLED","INTERRUPTED"]`)
	// A queue without a job definition runs no Batch step: no rule.
	_, env := engineEnvStack(t, StepTargets{Jobs: JobTargets{BatchJobQueues: []string{"etl"}}}, "")
	if env[AWSJobEventsQueueEnv] != nil {
		t.Errorf("no Batch or EMR steps, yet %s is set", AWSJobEventsQueueEnv)
	}
}
