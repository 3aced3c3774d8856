package tracing

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Middleware makes each request a server span, the child of the trace its
// headers carry (X-Amzn-Trace-Id from API Gateway, or traceparent), and
// puts API Gateway's request id (X-Amzn-Request-Id as the adapter passes
// it, else the Lambda invocation's) in the context for the logs.
func Middleware(next http.Handler) http.Handler { return MiddlewareWith(nil, next) }

// MiddlewareWith is Middleware with spans from tp (nil: the global provider).
func MiddlewareWith(tp trace.TracerProvider, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tracer := Tracer()
		if tp != nil {
			tracer = tp.Tracer(instrumentation)
		}
		ctx := r.Context()
		if !trace.SpanContextFromContext(ctx).IsValid() { // in a Lambda, the invocation's span (Lambda) is the parent
			ctx = Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		ctx = WithRequestID(ctx, r.Header.Get(RequestIDHeader))
		ctx, span := tracer.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
		if rec.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rec.status))
		}
	})
}

// RequestIDHeader is the header the API Gateway adapter copies the
// gateway's request id into.
const RequestIDHeader = "X-Amzn-Request-Id"

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the writer's Flush.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush passes a streaming response (the events feed) through.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
