package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler adds the correlation ids ctx carries to every record: trace_id
// (in X-Ray's 1-xxxxxxxx-yyyy form, so a CloudWatch Logs query and the X-Ray
// console use the same string), span_id, request_id, workflow_id,
// workflow_instance_id and workflow_run_id. Log with the *Context methods
// for them to appear.
type LogHandler struct {
	inner slog.Handler
}

// NewLogHandler wraps inner.
func NewLogHandler(inner slog.Handler) *LogHandler { return &LogHandler{inner: inner} }

// NewLogger is the JSON logger every Maestro process writes with: JSON
// lines to w's handler, with the correlation ids added.
func NewLogger(inner slog.Handler) *slog.Logger { return slog.New(NewLogHandler(inner)) }

// Enabled implements slog.Handler.
func (h *LogHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String("trace_id", XRayTraceID(sc.TraceID())), slog.String("span_id", sc.SpanID().String()))
		}
		if id := RequestID(ctx); id != "" {
			r.AddAttrs(slog.String("request_id", id))
		}
		if run, ok := RunFrom(ctx); ok {
			r.AddAttrs(slog.String("workflow_id", run.WorkflowID))
			if run.InstanceID != 0 {
				r.AddAttrs(slog.Int64("workflow_instance_id", run.InstanceID))
			}
			if run.RunID != 0 {
				r.AddAttrs(slog.Int64("workflow_run_id", run.RunID))
			}
		}
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &LogHandler{inner: h.inner.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{inner: h.inner.WithGroup(name)}
}

// XRayTraceID writes a trace id as X-Ray does: 1-<8 hex time>-<24 hex>.
func XRayTraceID(id trace.TraceID) string {
	s := id.String()
	return "1-" + s[:8] + "-" + s[8:]
}
