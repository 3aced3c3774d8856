package tracing

import (
	"context"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Run names a workflow run for the logs.
type Run struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
}

type runKey struct{}
type requestKey struct{}

// WithRun returns ctx naming the run the work is for; every log line
// written with it carries the run's ids.
func WithRun(ctx context.Context, r Run) context.Context {
	return context.WithValue(ctx, runKey{}, r)
}

// RunFrom is the run ctx names, if any.
func RunFrom(ctx context.Context) (Run, bool) {
	r, ok := ctx.Value(runKey{}).(Run)
	return r, ok
}

// WithRequestID returns ctx carrying the id of the request being served
// (API Gateway's request id).
func WithRequestID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, requestKey{}, id)
}

// RequestID is the request id ctx carries: the one WithRequestID set, else
// the Lambda invocation's aws_request_id, else "".
func RequestID(ctx context.Context) string {
	if id, ok := ctx.Value(requestKey{}).(string); ok {
		return id
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return lc.AwsRequestID
	}
	return ""
}
