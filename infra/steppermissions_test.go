package main

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// policyOf grants targets to a role in a stack of its own and returns the
// role's policy statements as synthesized.
func policyOf(t *testing.T, targets StepTargets) []map[string]any {
	t.Helper()
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Perms"), &awscdk.StackProps{
		Env: &awscdk.Environment{Account: jsii.String("123456789012"), Region: jsii.String("eu-west-1")}})
	role := awsiam.NewRole(stack, jsii.String("TaskRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("ecs-tasks.amazonaws.com"), nil)})
	for _, st := range StepRuntimeStatements(stack, targets) {
		role.AddToPrincipalPolicy(st)
	}
	tmpl := assertions.Template_FromStack(stack, nil)
	var out []map[string]any
	for _, r := range *tmpl.FindResources(jsii.String("AWS::IAM::Policy"), nil) {
		doc := props(*r)["PolicyDocument"].(map[string]any)
		for _, st := range doc["Statement"].([]any) {
			out = append(out, st.(map[string]any))
		}
	}
	return out
}

// Not parallel: the jsii runtime must not load assemblies from two
// goroutines at once, and the parallel tests wait until this one is done.
func TestStepRuntimeStatements(t *testing.T) {
	if got := policyOf(t, StepTargets{}); len(got) != 0 {
		t.Fatalf("no targets, yet the role may %s", asJSON(got))
	}
	got := policyOf(t, StepTargets{
		LambdaFunctions:    []string{"etl", "arn:aws:lambda:us-east-1:210987654321:function:shared"},
		EcsClusters:        []string{"jobs"},
		EcsTaskDefinitions: []string{"trainer", "scorer:4"},
		PassRoles:          []string{"trainer-task", "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"},
	})
	// A name becomes an ARN in the stack's account and region (the
	// partition stays a reference); an ARN is kept as given.
	local := func(rest string) any {
		return map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, rest}}}
	}
	const sharedARN = "arn:aws:lambda:us-east-1:210987654321:function:shared"
	cluster := []any{local(":ecs:eu-west-1:123456789012:cluster/jobs")}
	want := map[string]map[string]any{
		"InvokeStepFunctions": {"Action": "lambda:InvokeFunction",
			"Resource": []any{local(":lambda:eu-west-1:123456789012:function:etl"), local(":lambda:eu-west-1:123456789012:function:etl:*"),
				sharedARN, sharedARN + ":*"}},
		"RunStepTasks": {"Action": "ecs:RunTask",
			"Resource":  []any{local(":ecs:eu-west-1:123456789012:task-definition/trainer:*"), local(":ecs:eu-west-1:123456789012:task-definition/scorer:4")},
			"Condition": map[string]any{"ArnEquals": map[string]any{"ecs:cluster": cluster}}},
		"WatchStepTasks": {"Action": []any{"ecs:DescribeTasks", "ecs:StopTask"},
			"Resource": local(":ecs:eu-west-1:123456789012:task/jobs/*")},
		"FindStepTasks": {"Action": "ecs:ListTasks", "Resource": "*",
			"Condition": map[string]any{"ArnEquals": map[string]any{"ecs:cluster": cluster}}},
		"DescribeStepTaskDefinitions": {"Action": "ecs:DescribeTaskDefinition", "Resource": "*"},
		"PassStepTaskRoles": {"Action": "iam:PassRole",
			"Resource":  []any{local(":iam::123456789012:role/trainer-task"), "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"},
			"Condition": map[string]any{"StringEquals": map[string]any{"iam:PassedToService": "ecs-tasks.amazonaws.com"}}},
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
		if st["Effect"] != "Allow" {
			t.Errorf("%s: effect %v", sid, st["Effect"])
		}
		for k, v := range w {
			if asJSON(st[k]) != asJSON(v) {
				t.Errorf("%s.%s = %s, want %s", sid, k, asJSON(st[k]), asJSON(v))
			}
		}
		if strings.Contains(asJSON(st["Action"]), "*") {
			t.Errorf("%s grants a wildcard action %s", sid, asJSON(st["Action"]))
		}
	}
	if got := policyOf(t, StepTargets{LambdaFunctions: []string{"etl"}}); len(got) != 1 || got[0]["Sid"] != "InvokeStepFunctions" {
		t.Errorf("Lambda only: statements %s", asJSON(got))
	}
}
