package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// MigrationResourceType is the custom resource that runs the migrate
// function on deploy.
const MigrationResourceType = "Custom::MaestroMigration"

// MigrationProps configures NewMigration.
type MigrationProps struct {
	// Vpc and SecurityGroup place the function beside the database (it
	// connects to the writer directly, not through RDS Proxy).
	Vpc           awsec2.IVpc
	SecurityGroup awsec2.ISecurityGroup
	// Code is functions/migrate's package.
	Code awslambda.Code
	// MasterSecret, OwnerSecret and AppSecret: the master user makes the
	// owner and the app role logins with their secrets' passwords; the
	// migrations run as the owner.
	MasterSecret, OwnerSecret, AppSecret awssecretsmanager.ISecret
	// Architecture is the package's architecture; arm64 when nil.
	Architecture awslambda.Architecture
	// LogRetention applies to the function's log group.
	LogRetention awslogs.RetentionDays
}

// Migration is the deploy step that brings the schema up to the release's
// migrations: a custom resource whose handler is the migrate function. Its
// properties carry the function package's asset key, so every deploy with a
// changed package (a new migration changes it: they are embedded) runs it
// again. It lives in the data stack, on which every stack with code
// depends, so no code of a release runs before its migrations completed;
// a failed migration fails the data stack's update, and nothing after it is
// deployed.
type Migration struct {
	constructs.Construct
	// Function is the migrate function.
	Function *Function
	// Resource is the custom resource; a rotation of the role secrets
	// depends on it (the users must exist first).
	Resource awscdk.CustomResource
}

// NewMigration builds the migrate function and its custom resource in
// scope (the data stack).
func NewMigration(scope constructs.Construct, id string, props *MigrationProps) *Migration {
	c := constructs.NewConstruct(scope, &id)
	fn := NewFunction(c, "Migrate", &FunctionProps{
		FunctionBase: FunctionBase{Vpc: props.Vpc, SecurityGroup: props.SecurityGroup,
			Architecture: props.Architecture, LogRetention: props.LogRetention},
		Description: "Maestro migrate: makes the database roles logins and applies the schema migrations, on deploy",
		Code:        props.Code,
		Environment: map[string]string{
			// functions/internal/migrate's Env* names.
			"MAESTRO_MASTER_SECRET_ARN": *props.MasterSecret.SecretArn(),
			"MAESTRO_OWNER_SECRET_ARN":  *props.OwnerSecret.SecretArn(),
			"MAESTRO_APP_SECRET_ARN":    *props.AppSecret.SecretArn(),
		},
		// One deploy at a time; the migrations' advisory lock covers the rest.
		ReservedConcurrency: 1,
		// Long enough for a migration that rewrites a big table; the custom
		// resource waits as long.
		Timeout: awscdk.Duration_Minutes(jsii.Number(10)),
	})
	for _, s := range []awssecretsmanager.ISecret{props.MasterSecret, props.OwnerSecret, props.AppSecret} {
		s.GrantRead(fn.Role, nil)
	}
	// The package's asset key is its content hash: a new package, a new run.
	code := props.Code.Bind(awscdk.Stack_Of(c))
	properties := map[string]any{}
	if code.S3Location != nil {
		properties["Package"] = *code.S3Location.ObjectKey
	}
	resource := awscdk.NewCustomResource(c, jsii.String("Schema"), &awscdk.CustomResourceProps{
		ServiceToken:   fn.Function.FunctionArn(),
		ResourceType:   jsii.String(MigrationResourceType),
		Properties:     &properties,
		ServiceTimeout: awscdk.Duration_Minutes(jsii.Number(11)),
	})
	return &Migration{Construct: c, Function: fn, Resource: resource}
}
