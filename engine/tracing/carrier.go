package tracing

import (
	"context"

	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The headers the formats use.
const (
	TraceparentHeader = "traceparent"
	XRayHeader        = "X-Amzn-Trace-Id"
)

// Traceparent is the W3C traceparent of the span in ctx, or "" when ctx
// carries none: what the outbox rows and message attributes store.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c[TraceparentHeader]
}

// WithTraceparent returns ctx with the remote span context tp names as the
// parent of the next span; ctx unchanged when tp is empty or malformed.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{TraceparentHeader: tp})
}

// XRayTraceHeader is the X-Ray trace header (Root=1-...;Parent=...;Sampled=.)
// of the span in ctx, or "": SQS's AWSTraceHeader system attribute.
func XRayTraceHeader(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	xray.Propagator{}.Inject(ctx, c)
	return c.Get(XRayHeader)
}

// WithXRayTraceHeader returns ctx with the remote span context an X-Ray
// trace header names; ctx unchanged when h is empty or malformed.
func WithXRayTraceHeader(ctx context.Context, h string) context.Context {
	if h == "" {
		return ctx
	}
	return xray.Propagator{}.Extract(ctx, propagation.MapCarrier{XRayHeader: h})
}

// XRayToTraceparent converts an X-Ray trace header to a traceparent, or "".
func XRayToTraceparent(h string) string {
	return Traceparent(WithXRayTraceHeader(context.Background(), h))
}

// TraceparentToXRay converts a traceparent to an X-Ray trace header, or "".
func TraceparentToXRay(tp string) string {
	return XRayTraceHeader(WithTraceparent(context.Background(), tp))
}
