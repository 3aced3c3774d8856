package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdadestinations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/engine/retention"
)

// ArchiveSchedule is when EventBridge Scheduler invokes the archiver: every
// hour. A pass archives at most retention.Config.MaxRuns runs, and the
// ArchiveLag alarm says when that does not keep up.
const ArchiveSchedule = "rate(1 hour)"

// ArchiveTimeoutSeconds is the archiver's timeout: a pass stops between
// batches before its deadline.
const ArchiveTimeoutSeconds = 900

// ArchiveKeys are the objects the archive's writers and readers may touch
// (engine/archive.Key): every object is under runs/.
const ArchiveKeys = "runs/*"

// ArchiveStackProps configures NewArchiveStack.
type ArchiveStackProps struct {
	awscdk.StackProps
	// Functions is what the archiver shares with every function.
	Functions FunctionBase
	// Code is functions/archiver's package; nil deploys only the bucket and
	// the schedule's dead-letter queue.
	Code awslambda.Code
	// ReservedConcurrency caps the function (1 when 0: two passes at once
	// would archive the same runs twice).
	ReservedConcurrency int
	// Retention is MAESTRO_RETENTION: how long ended runs stay in the
	// database (a Go duration or days, "90d").
	Retention string
	// RemovalPolicy applies to the bucket (the deployment's data policy).
	RemovalPolicy awscdk.RemovalPolicy
	// Emulator leaves out what the emulator cannot host: the bucket (ministack
	// provisions no S3 bucket through CloudFormation), and with it the
	// function and its schedule; maestro dev and the e2e engine archive to a
	// directory instead.
	Emulator bool
}

// ArchiveStack is retention and archival (docs/operations.md): the archive
// bucket, the archiver function and its hourly schedule.
type ArchiveStack struct {
	awscdk.Stack
	// Bucket holds the archived runs: gzip JSON lines under
	// runs/workflow_id=<id>/date=<day>/.
	Bucket awss3.Bucket
	// DeadLetterQueue receives invocations Scheduler could not deliver and
	// those that kept failing.
	DeadLetterQueue awssqs.Queue
	// Function is functions/archiver; nil until its code is deployed.
	Function *Function
	// Schedule invokes Function hourly; nil with Function.
	Schedule awsscheduler.CfnSchedule
}

// NewArchiveStack builds the archive stack.
func NewArchiveStack(scope constructs.Construct, id string, props *ArchiveStackProps) *ArchiveStack {
	stack := awscdk.NewStack(scope, &id, &props.StackProps)
	dlq := NewDeadLetterQueue(stack, "ScheduleDeadLetterQueue")
	if props.Emulator {
		return &ArchiveStack{Stack: stack, DeadLetterQueue: dlq}
	}
	bucket := awss3.NewBucket(stack, jsii.String("Bucket"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:     props.RemovalPolicy,
		// Archived runs are read rarely: after 30 days they move to
		// Infrequent Access, after 180 to Glacier Instant Retrieval (still
		// read in milliseconds by GET of an archived run).
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id: jsii.String("archive-tiers"),
			Transitions: &[]*awss3.Transition{
				{StorageClass: awss3.StorageClass_INFREQUENT_ACCESS(), TransitionAfter: awscdk.Duration_Days(jsii.Number(30))},
				{StorageClass: awss3.StorageClass_GLACIER_INSTANT_RETRIEVAL(), TransitionAfter: awscdk.Duration_Days(jsii.Number(180))},
			},
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}},
	})
	nagSuppress(bucket, "AwsSolutions-S1", "the archive is written by the archiver function and read by the API function only, "+
		"each through its own role: CloudTrail records who did what; server access logs would add a second bucket for no new fact")
	s := &ArchiveStack{Stack: stack, Bucket: bucket, DeadLetterQueue: dlq}
	if props.Code == nil {
		return s
	}
	fn := NewFunction(stack, "Archiver", &FunctionProps{
		FunctionBase: props.Functions,
		Description:  "Maestro retention: archives ended runs past their retention to S3 and deletes them, hourly",
		Code:         props.Code,
		Environment: map[string]string{
			archive.EnvBucket:      *bucket.BucketName(),
			retention.EnvRetention: props.Retention,
		},
		ReservedConcurrency: max(props.ReservedConcurrency, 1),
		Timeout:             awscdk.Duration_Seconds(jsii.Number(ArchiveTimeoutSeconds)),
		MemoryMiB:           1024,
	})
	// Write archive objects, nothing else: no read, list or delete.
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("s3:PutObject"),
		Resources: &[]*string{bucket.ArnForObjects(jsii.String(ArchiveKeys))},
	}))
	nagSuppress(fn.Role, "AwsSolutions-IAM5", "the archiver writes one object per batch under runs/ (keys by workflow, date and batch id): "+
		"s3:PutObject on the archive bucket's runs/* only", archiveObjectsFinding)
	if !props.Emulator {
		fn.Function.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
			OnFailure:     awslambdadestinations.NewSqsDestination(dlq),
			RetryAttempts: jsii.Number(0),
			MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(3600)),
		})
	}
	role := awsiam.NewRole(stack, jsii.String("ScheduleRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": *awscdk.Aws_ACCOUNT_ID()}},
		}),
		Description: jsii.String("EventBridge Scheduler invoking the Maestro archiver function"),
	})
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("lambda:InvokeFunction"),
		Resources: &[]*string{fn.Function.FunctionArn()},
	}))
	dlq.GrantSendMessages(role)
	schedule := awsscheduler.NewCfnSchedule(stack, jsii.String("Schedule"), &awsscheduler.CfnScheduleProps{
		Description:        jsii.String("Archives Maestro's ended runs past their retention, hourly"),
		ScheduleExpression: jsii.String(ArchiveSchedule),
		FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{
			Mode: jsii.String("FLEXIBLE"), MaximumWindowInMinutes: jsii.Number(15)},
		State: jsii.String("ENABLED"),
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:     fn.Function.FunctionArn(),
			RoleArn: role.RoleArn(),
			RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{
				MaximumRetryAttempts:     jsii.Number(3),
				MaximumEventAgeInSeconds: jsii.Number(3600),
			},
			DeadLetterConfig: &awsscheduler.CfnSchedule_DeadLetterConfigProperty{Arn: dlq.QueueArn()},
		},
	})
	s.Function, s.Schedule = fn, schedule
	return s
}

// GrantReadArchive lets fn read archived runs (GET of an archived run) and
// tells it the bucket (MAESTRO_ARCHIVE_BUCKET); nothing without a bucket.
func (s *ArchiveStack) GrantReadArchive(fn *Function) {
	if s.Bucket == nil {
		return
	}
	fn.Function.AddEnvironment(jsii.String(archive.EnvBucket), s.Bucket.BucketName(), nil)
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("s3:GetObject"),
		Resources: &[]*string{s.Bucket.ArnForObjects(jsii.String(ArchiveKeys))},
	}))
	nagSuppress(fn.Role, "AwsSolutions-IAM5", "GET of an archived run reads its object under runs/ (keys by workflow, date and batch id): "+
		"s3:GetObject on the archive bucket's runs/* only", archiveObjectsFinding)
}

// archiveObjectsFinding is cdk-nag's finding for a grant on the archive's
// objects (runs/*), and nothing wider.
// (The API's grant names the bucket through the archive stack's export.)
const archiveObjectsFinding = `/^Resource::(<Bucket[0-9A-F]+\.Arn>|[A-Za-z0-9-]*Archive:ExportsOutputFnGetAttBucket[0-9A-F]+Arn[0-9A-F]+)\/runs\/\*$/`
