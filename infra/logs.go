package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// internalLogRetention gives the CDK's own functions (custom resource
// providers such as the one that locks down the VPC's default security
// group) a log group with the app's retention. Without one, Lambda creates
// /aws/lambda/<name> on the first invocation and keeps it forever, and the
// stack cannot delete it. Maestro's functions have their log group already
// (NewFunction); the hosted rotation function is a SAM application whose
// log group the app cannot reach (docs/deploy.md).
type internalLogRetention struct {
	retention awslogs.RetentionDays
}

// Visit adds the log group to a function that has none.
func (a *internalLogRetention) Visit(node constructs.IConstruct) {
	res, ok := node.(awscdk.CfnResource)
	if !ok || res.CfnResourceType() == nil || *res.CfnResourceType() != "AWS::Lambda::Function" {
		return
	}
	if fn, ok := node.(awslambda.CfnFunction); ok && fn.LoggingConfig() != nil {
		return
	}
	scope, ok := node.Node().Scope().(constructs.Construct)
	if !ok {
		return
	}
	id := *node.Node().Id() + "Logs"
	if scope.Node().TryFindChild(jsii.String(id)) != nil {
		return
	}
	logs := awslogs.NewLogGroup(scope, jsii.String(id), &awslogs.LogGroupProps{
		Retention:     a.retention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	res.AddPropertyOverride(jsii.String("LoggingConfig.LogGroup"), logs.LogGroupName())
}
