package e2e_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/maestro-aws/maestro/engine/awsconf"
	"github.com/maestro-aws/maestro/localstack/iamcheck"
)

// enginePrincipal is the name the engine's AWS calls are recorded under.
const enginePrincipal = "engine"

// Grants a principal may hold that its code never calls: AWS uses them as
// the role on the function's behalf.
var (
	lambdaServiceAllowances = []iamcheck.Allowance{
		{Action: "logs:CreateLogGroup", Reason: "the Lambda service writes the function's logs as its role"},
		{Action: "logs:CreateLogStream", Reason: "the Lambda service writes the function's logs as its role"},
		{Action: "logs:PutLogEvents", Reason: "the Lambda service writes the function's logs as its role"},
		{Action: "ec2:CreateNetworkInterface", Reason: "the Lambda service attaches the function to the VPC as its role"},
		{Action: "ec2:DescribeNetworkInterfaces", Reason: "the Lambda service attaches the function to the VPC as its role"},
		{Action: "ec2:DescribeSubnets", Reason: "the Lambda service attaches the function to the VPC as its role"},
		{Action: "ec2:DeleteNetworkInterface", Reason: "the Lambda service detaches the function from the VPC as its role"},
		{Action: "ec2:AssignPrivateIpAddresses", Reason: "the Lambda service attaches the function to the VPC as its role"},
		{Action: "ec2:UnassignPrivateIpAddresses", Reason: "the Lambda service detaches the function from the VPC as its role"},
		{Action: "xray:PutTraceSegments", Reason: "active tracing: the Lambda service sends the function's segments"},
		{Action: "xray:PutTelemetryRecords", Reason: "active tracing: the Lambda service sends the function's segments"},
	}
	queuePollerAllowances = []iamcheck.Allowance{
		{Action: "sqs:ReceiveMessage", Reason: "the event source mapping polls the queue as the function's role"},
		{Action: "sqs:DeleteMessage", Reason: "the event source mapping deletes the messages the function handled"},
		{Action: "sqs:ChangeMessageVisibility", Reason: "the event source mapping returns the messages the function failed"},
		{Action: "sqs:GetQueueAttributes", Reason: "the event source mapping reads the queue's attributes"},
		{Action: "sqs:GetQueueUrl", Reason: "granted with the consume grant; the event source mapping may resolve the queue"},
	}
	// infra.EmulatorBatchGrant: the emulator's own name for a batch call.
	emulatorBatchAllowances = []iamcheck.Allowance{
		{Action: "sqs:SendMessageBatch", Reason: "emulator target only: AWS authorises SendMessageBatch as sqs:SendMessage, the emulator by the call's name"},
		{Action: "sns:PublishBatch", Reason: "emulator target only: AWS authorises PublishBatch as sns:Publish, the emulator by the call's name"},
		{Action: "sqs:DeleteMessageBatch", Reason: "emulator target only: AWS authorises DeleteMessageBatch as sqs:DeleteMessage, the emulator by the call's name"},
	}
	// The AWS job steps' grants (infra/awsjobperms.go) that a run without a
	// crash does not call, and the events queue's consume grant.
	awsJobAllowances = []iamcheck.Allowance{
		{Action: "athena:ListQueryExecutions", Reason: "a new engine owner finds a query started before a crash (AWS job steps)"},
		{Action: "athena:BatchGetQueryExecution", Reason: "a new engine owner finds a query started before a crash (AWS job steps)"},
		{Action: "athena:StopQueryExecution", Reason: "a stopped Athena step stops its query"},
		{Action: "glue:GetJobRuns", Reason: "a new engine owner finds a job run started before a crash (AWS job steps)"},
		{Action: "glue:BatchStopJobRun", Reason: "a stopped Glue step stops its job run"},
		{Action: "batch:ListJobs", Reason: "a new engine owner finds a Batch job submitted before a crash (Batch steps)"},
		{Action: "batch:TerminateJob", Reason: "a stopped Batch step terminates its job (the emulator's Batch has no TerminateJob)"},
		{Action: "batch:TagResource", Reason: "AWS authorises the tags of a SubmitJob as batch:TagResource (batch:CreateAction SubmitJob); the emulator does not ask for it"},
		{Action: "s3:GetObject", Reason: "Athena writes and reads a query's results with the caller's permissions"},
		{Action: "s3:PutObject", Reason: "Athena writes a query's results with the caller's permissions"},
		{Action: "s3:AbortMultipartUpload", Reason: "Athena writes a query's results with the caller's permissions"},
		{Action: "s3:GetBucketLocation", Reason: "Athena checks the results bucket with the caller's permissions"},
		{Action: "s3:ListBucket", Reason: "Athena checks the results bucket with the caller's permissions"},
		{Action: "sqs:ChangeMessageVisibility", Reason: "CDK's consume grant includes it; the AWS job events consumer deletes what it handled and lets the rest come back"},
		{Action: "sqs:GetQueueAttributes", Reason: "CDK's consume grant includes it; the AWS job events consumer reads a known queue URL"},
		{Action: "sqs:GetQueueUrl", Reason: "CDK's consume grant includes it; the AWS job events consumer reads a known queue URL"},
	}
	secretReadAllowances = []iamcheck.Allowance{
		{Action: "secretsmanager:DescribeSecret", Reason: "CDK's secret read grant pairs it with GetSecretValue; the pool reads the secret with GetSecretValue only"},
		{Action: "kms:Decrypt", Reason: "reading a secret encrypted with a customer key decrypts it as the caller"},
	}
	queueSendAllowances = []iamcheck.Allowance{
		{Action: "sqs:GetQueueAttributes", Reason: "CDK's send grant includes it; the sink sends to a known queue URL"},
		{Action: "sqs:GetQueueUrl", Reason: "CDK's send grant includes it; the sink sends to a known queue URL"},
		{Action: "kms:Encrypt", Reason: "sending to a queue encrypted with a customer key"},
		{Action: "kms:GenerateDataKey*", Reason: "sending to a queue encrypted with a customer key"},
		{Action: "kms:Decrypt", Reason: "sending to a queue encrypted with a customer key"},
	}
)

// checkIAM holds every AWS call the deployment's Lambdas and the engine
// recorded during the scenarios (engine/awsconf) against the IAM policies
// of their deployed roles, both ways (localstack/iamcheck). The emulator
// has evaluated each call already (AUTH=true: a missing grant fails the
// scenario that needed it); this adds the other direction, a grant that
// no code uses.
func checkIAM(t *testing.T, d *Deployment) {
	calls, err := awsconf.ReadCalls(d.Emulator.CallLog)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 {
		t.Fatal("no AWS call was recorded: the recorder (MAESTRO_AWS_CALL_LOG) did not reach the Lambdas or the engine")
	}
	ctx := context.Background()
	fns := lambda.NewFromConfig(d.AWS)
	roles := iam.NewFromConfig(d.AWS)
	var principals []iamcheck.Principal
	pages := lambda.NewListFunctionsPaginator(fns, &lambda.ListFunctionsInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatalf("list functions: %v", err)
		}
		for _, fn := range page.Functions {
			// Our functions are the Go bootstraps; CDK's own custom
			// resource handlers (Node, Python) do not record their calls.
			if aws.ToString(fn.Handler) != "bootstrap" {
				continue
			}
			name := aws.ToString(fn.FunctionName)
			allow := append([]iamcheck.Allowance{}, lambdaServiceAllowances...)
			allow = append(allow, secretReadAllowances...)
			allow = append(allow, queuePollerAllowances...)
			allow = append(allow, emulatorBatchAllowances...)
			principals = append(principals, iamcheck.Principal{Name: name,
				Policies: rolePolicies(t, roles, aws.ToString(fn.Role)), Allowances: allow})
		}
	}
	allow := append(append(append([]iamcheck.Allowance{}, secretReadAllowances...), queueSendAllowances...), emulatorBatchAllowances...)
	allow = append(allow, awsJobAllowances...)
	principals = append(principals, iamcheck.Principal{Name: enginePrincipal,
		Policies: rolePolicies(t, roles, d.Output(t, stackEngine, "TaskRoleArn")), Allowances: allow})
	counts := map[string]int{}
	for _, c := range calls {
		counts[c.Principal]++
	}
	t.Logf("recorded AWS calls by principal: %v", counts)
	for _, f := range iamcheck.Check(calls, principals) {
		t.Error(f)
	}
}

// rolePolicies reads every policy document of a role from IAM: its inline
// policies and the default versions of its attached managed policies.
func rolePolicies(t *testing.T, client *iam.Client, roleARN string) []iamcheck.Document {
	t.Helper()
	ctx := context.Background()
	name := roleARN[strings.LastIndex(roleARN, "/")+1:]
	var docs []iamcheck.Document
	add := func(raw string) {
		if dec, err := url.QueryUnescape(raw); err == nil {
			raw = dec
		}
		doc, err := iamcheck.ParseDocument(raw)
		if err != nil {
			t.Fatalf("role %s: %v", name, err)
		}
		docs = append(docs, doc)
	}
	inline, err := client.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: &name})
	if err != nil {
		t.Fatalf("role %s: list inline policies: %v", name, err)
	}
	for _, p := range inline.PolicyNames {
		out, err := client.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: &name, PolicyName: aws.String(p)})
		if err != nil {
			t.Fatalf("role %s: policy %s: %v", name, p, err)
		}
		add(aws.ToString(out.PolicyDocument))
	}
	attached, err := client.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: &name})
	if err != nil {
		t.Fatalf("role %s: list attached policies: %v", name, err)
	}
	for _, p := range attached.AttachedPolicies {
		pol, err := client.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: p.PolicyArn})
		if err != nil {
			t.Fatalf("role %s: managed policy %s: %v", name, aws.ToString(p.PolicyArn), err)
		}
		v, err := client.GetPolicyVersion(ctx, &iam.GetPolicyVersionInput{PolicyArn: p.PolicyArn, VersionId: pol.Policy.DefaultVersionId})
		if err != nil {
			t.Fatalf("role %s: managed policy %s: %v", name, aws.ToString(p.PolicyArn), err)
		}
		add(aws.ToString(v.PolicyVersion.Document))
	}
	return docs
}
