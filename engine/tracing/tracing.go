// Package tracing sets up OpenTelemetry once per process and carries a
// trace across Maestro's hops: API Gateway → API Lambda → database outbox →
// engine → SQS → publisher → SNS (docs/tracing.md).
//
// Trace ids are X-Ray compatible (the X-Ray ID generator) and travel as W3C
// traceparent strings in the database and in message attributes, and as
// X-Amzn-Trace-Id / AWSTraceHeader where AWS services expect them. Without an
// exporter, spans are still created (never sampled) so that their ids reach
// the logs and the outbox at almost no cost.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-aws/maestro/engine/awsconf"
)

// Service names, the resource's service.name per process.
const (
	ServiceEngine      = "maestro-engine"
	ServiceAPI         = "maestro-api"
	ServicePublisher   = "maestro-publisher"
	ServiceSignals     = "maestro-signals"
	ServiceTimeTrigger = "maestro-timetrigger"
)

// instrumentation is the tracer's name.
const instrumentation = "github.com/maestro-aws/maestro"

// Propagator carries a trace in both formats: W3C traceparent (what the
// outbox and message attributes hold) and X-Ray's X-Amzn-Trace-Id (what API
// Gateway and Lambda pass). Extraction takes whichever is present.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(
	propagation.TraceContext{}, xray.Propagator{})

// Tracer is Maestro's tracer from the global provider Setup installs.
func Tracer() trace.Tracer { return otel.Tracer(instrumentation) }

// Options tune Setup; the zero value reads the standard OTEL_* environment.
type Options struct {
	// Exporter replaces the OTLP exporter (tests pass an in-memory one).
	Exporter sdktrace.SpanExporter
	// Getenv reads the environment (os.Getenv by default).
	Getenv func(string) string
}

// Setup installs the global tracer provider and propagator for service and
// returns the provider, whose ForceFlush a Lambda calls after each
// invocation and whose Shutdown the process calls on exit.
//
// The exporter is OTLP/HTTP when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT is set (an ADOT collector, or X-Ray's OTLP
// endpoint, whose requests are SigV4-signed for the service "xray");
// OTEL_TRACES_SAMPLER picks the sampler as the SDK documents. With no
// endpoint nothing is exported and nothing is sampled, but every span still
// gets ids.
func Setup(ctx context.Context, service string, opt Options) (*sdktrace.TracerProvider, error) {
	getenv := opt.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if name := getenv("OTEL_SERVICE_NAME"); name != "" {
		service = name // the deployment's name for the process (infra: the stage's)
	}
	res := resource.NewSchemaless(attribute.String("service.name", service))
	tpOpts := []sdktrace.TracerProviderOption{
		sdktrace.WithIDGenerator(xray.NewIDGenerator()),
		sdktrace.WithResource(res),
	}
	exp := opt.Exporter
	if exp == nil {
		var err error
		if exp, err = otlpExporter(ctx, getenv); err != nil {
			return nil, err
		}
	}
	if exp == nil {
		tpOpts = append(tpOpts, sdktrace.WithSampler(sdktrace.NeverSample()))
	} else {
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
		if getenv("OTEL_TRACES_SAMPLER") == "" {
			tpOpts = append(tpOpts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
		}
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) // export errors must not spam the logs; spans are best effort
	return tp, nil
}

// otlpExporter builds the OTLP/HTTP exporter from the environment, or nil
// when no endpoint is configured.
func otlpExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if endpoint == "" || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return nil, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("tracing: parse OTLP endpoint %q: %w", endpoint, err)
	}
	var opts []otlptracehttp.Option // the exporter reads the rest of OTEL_EXPORTER_OTLP_* itself
	if region, ok := xrayRegion(u.Host); ok {
		cfg, err := awsconf.Load(ctx, config.WithRegion(region))
		if err != nil {
			return nil, fmt.Errorf("tracing: aws config for signing OTLP: %w", err)
		}
		opts = append(opts, otlptracehttp.WithHTTPClient(&http.Client{
			Transport: &SigV4Transport{Base: http.DefaultTransport, Credentials: cfg.Credentials, Region: region, Service: "xray"},
		}))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter for %s: %w", endpoint, err)
	}
	return exp, nil
}

// XRayEndpoint reports whether an OTLP traces endpoint is X-Ray's
// (https://xray.REGION.amazonaws.com/v1/traces): its requests are signed
// with the process's credentials and authorized as xray:PutTraceSegments.
func XRayEndpoint(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	_, ok := xrayRegion(u.Host)
	return ok
}

// xrayRegion reports the region of X-Ray's OTLP endpoint host
// (xray.REGION.amazonaws.com), whose requests must be SigV4-signed.
func xrayRegion(host string) (string, bool) {
	host, _, _ = strings.Cut(host, ":")
	rest, ok := strings.CutPrefix(host, "xray.")
	if !ok {
		return "", false
	}
	region, ok := strings.CutSuffix(rest, ".amazonaws.com")
	if !ok || region == "" || strings.Contains(region, ".") {
		return "", false
	}
	return region, true
}

// Shutdown flushes and stops a provider from Setup; nil is fine.
func Shutdown(ctx context.Context, tp *sdktrace.TracerProvider) error {
	if tp == nil {
		return nil
	}
	if err := tp.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing: shut down: %w", err)
	}
	return nil
}
