package tracing

import (
	"context"
	"os"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// lambdaTraceKey is the context key aws-lambda-go stores the invocation's
// X-Ray trace header under (it also sets _X_AMZN_TRACE_ID).
const lambdaTraceKey = "x-amzn-trace-id"

// LambdaTraceHeader is the X-Ray trace header of the running invocation
// (with Tracing: Active, its Parent is the function's own segment), or "".
func LambdaTraceHeader(ctx context.Context) string {
	if h, ok := ctx.Value(lambdaTraceKey).(string); ok && h != "" {
		return h
	}
	return os.Getenv("_X_AMZN_TRACE_ID")
}

// Lambda wraps a Lambda handler: each invocation is a span named name, the
// child of the invocation's X-Ray trace when Lambda passes one, and the
// provider is flushed before the handler returns, since Lambda freezes the
// process between invocations. tp may be nil (no flush).
func Lambda[In, Out any](tp *sdktrace.TracerProvider, name string, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		ctx = WithXRayTraceHeader(ctx, LambdaTraceHeader(ctx))
		ctx, span := Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		out, err := h(ctx, in)
		if err != nil {
			span.RecordError(err)
		}
		span.End()
		if tp != nil {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = tp.ForceFlush(fctx) // best effort: a trace must never fail an invocation
			cancel()
		}
		return out, err
	}
}
