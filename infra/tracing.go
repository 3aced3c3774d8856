package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/engine/tracing"
)

// TraceExport is where the engine and the functions send their spans
// (docs/tracing.md): OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and
// OTEL_SERVICE_NAME in their environments. The zero value exports nothing
// (spans still give the logs their ids).
type TraceExport struct {
	// Endpoint is the OTLP/HTTP traces URL (maestro:otlpEndpoint): X-Ray's
	// https://xray.REGION.amazonaws.com/v1/traces, or a collector's.
	Endpoint string
	// Stage suffixes the service names, so that stages tell their spans
	// apart ("maestro-engine-dev").
	Stage string
}

// Environment is the OTEL_* environment of the process named service
// ("maestro-engine"), or nil when nothing is exported.
func (t TraceExport) Environment(service string) map[string]*string {
	if t.Endpoint == "" {
		return nil
	}
	if t.Stage != "" {
		service += "-" + t.Stage
	}
	return map[string]*string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": jsii.String(t.Endpoint),
		"OTEL_SERVICE_NAME":                  jsii.String(service),
	}
}

// XRay reports an export straight to X-Ray's OTLP endpoint: engine/tracing
// signs it with the role's credentials, and X-Ray authorizes it as
// xray:PutTraceSegments.
func (t TraceExport) XRay() bool { return t.Endpoint != "" && tracing.XRayEndpoint(t.Endpoint) }

// Grant lets role send spans to X-Ray's OTLP endpoint when that is where
// they go; a collector's endpoint needs no grant (the collector signs).
// The action takes no resource-level scope, hence "*". Functions need no
// call: active tracing grants them the action already.
func (t TraceExport) Grant(role awsiam.IRole) {
	if !t.XRay() {
		return
	}
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("OtlpToXRay"),
		Actions:   jsii.Strings("xray:PutTraceSegments"),
		Resources: jsii.Strings("*"),
	}))
	nagSuppress(role, "AwsSolutions-IAM5", "xray:PutTraceSegments (X-Ray's OTLP endpoint, maestro:otlpEndpoint) supports no resource-level permissions",
		`/^Resource::\*$/`)
}
