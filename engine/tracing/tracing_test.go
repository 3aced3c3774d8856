package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-aws/maestro/engine/tracing"
)

func TestLogHandlerAddsCorrelationIDs(t *testing.T) {
	var buf bytes.Buffer
	logger := tracing.NewLogger(slog.NewJSONHandler(&buf, nil))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	ctx, span := tp.Tracer("t").Start(context.Background(), "op")
	defer span.End()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	ctx = tracing.WithRun(ctx, tracing.Run{WorkflowID: "wf", InstanceID: 7, RunID: 2})
	logger.With("k", "v").InfoContext(ctx, "hello")

	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	want := map[string]any{
		"trace_id": tracing.XRayTraceID(sc.TraceID()), "span_id": sc.SpanID().String(), "request_id": "req-1",
		"workflow_id": "wf", "workflow_instance_id": float64(7), "workflow_run_id": float64(2), "k": "v",
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, line[k], v, buf.String())
		}
	}
	if !strings.HasPrefix(line["trace_id"].(string), "1-") {
		t.Errorf("trace_id %v is not in X-Ray form", line["trace_id"])
	}

	buf.Reset()
	logger.Info("no context")
	if strings.Contains(buf.String(), "trace_id") || strings.Contains(buf.String(), "workflow_id") {
		t.Errorf("a line without context got ids: %s", buf.String())
	}
}

func TestTraceparentAndXRayRoundTrip(t *testing.T) {
	const tp = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
	h := tracing.TraceparentToXRay(tp)
	if h != "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1" {
		t.Fatalf("X-Ray header %q", h)
	}
	if got := tracing.XRayToTraceparent(h); got != tp {
		t.Fatalf("back to traceparent: %q, want %q", got, tp)
	}
	if tracing.Traceparent(context.Background()) != "" || tracing.TraceparentToXRay("garbage") != "" {
		t.Fatal("no span must give no header")
	}
}

// TestSetupWithoutExporterStillGivesIDs: with no OTLP endpoint, spans are
// not sampled (nothing is exported) but have ids, and a child of a remote
// parent keeps its trace id.
func TestSetupWithoutExporterStillGivesIDs(t *testing.T) {
	tp, err := tracing.Setup(context.Background(), tracing.ServiceEngine, tracing.Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tracing.Shutdown(context.Background(), tp) }()
	const parent = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
	ctx, span := tracing.Tracer().Start(tracing.WithTraceparent(context.Background(), parent), "child")
	defer span.End()
	sc := span.SpanContext()
	if !sc.IsValid() || sc.TraceID().String() != "5759e988bd862e3fe1be46a994272793" {
		t.Fatalf("child span context %v", sc)
	}
	if span.IsRecording() {
		t.Fatal("a span is recorded with no exporter")
	}
	if got := tracing.Traceparent(ctx); !strings.HasPrefix(got, "00-5759e988bd862e3fe1be46a994272793-") || got == parent {
		t.Fatalf("traceparent of the child %q", got)
	}
}

func TestSetupWithExporterRecordsXRayIDs(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp, err := tracing.Setup(context.Background(), tracing.ServiceAPI, tracing.Options{Exporter: exp, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.Tracer().Start(context.Background(), "root")
	span.End()
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported", len(spans))
	}
	// The X-Ray ID generator puts the start time in the first 8 hex digits.
	if id := spans[0].SpanContext.TraceID().String(); id[:8] < "60000000" {
		t.Errorf("trace id %s does not start with an epoch", id)
	}
	if got := spans[0].Resource.String(); !strings.Contains(got, "maestro-api") {
		t.Errorf("resource %s", got)
	}
	_ = tracing.Shutdown(context.Background(), tp)
}

func TestMiddlewareContinuesAPIGatewayTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	var seen trace.SpanContext
	var reqID string
	h := tracing.MiddlewareWith(tp, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = trace.SpanContextFromContext(r.Context())
		reqID = tracing.RequestID(r.Context())
		w.WriteHeader(http.StatusCreated)
	}))
	req := httptest.NewRequest(http.MethodPost, "/api/v3/workflows/wf/versions/latest/actions/start", nil)
	req.Header.Set("X-Amzn-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	req.Header.Set(tracing.RequestIDHeader, "gw-1")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if seen.TraceID().String() != "5759e988bd862e3fe1be46a994272793" || reqID != "gw-1" {
		t.Fatalf("handler saw trace %s request %q", seen.TraceID(), reqID)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Parent.SpanID().String() != "53995c3f42cd8ad8" || spans[0].SpanKind != trace.SpanKindServer {
		t.Fatalf("spans %+v", spans)
	}
}

// TestSigV4TransportSignsForXRay: requests to X-Ray's OTLP endpoint carry a
// SigV4 signature for the service xray, and the body arrives whole.
func TestSigV4TransportSignsForXRay(t *testing.T) {
	var auth, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		b, _ := io.ReadAll(r.Body)
		body = string(b)
	}))
	defer srv.Close()
	c := &http.Client{Transport: &tracing.SigV4Transport{Base: http.DefaultTransport,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), Region: "eu-west-1", Service: "xray"}}
	resp, err := c.Post(srv.URL+"/v1/traces", "application/x-protobuf", strings.NewReader("spans"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if !strings.Contains(auth, "AWS4-HMAC-SHA256 Credential=AKID/") || !strings.Contains(auth, "/eu-west-1/xray/aws4_request") {
		t.Fatalf("Authorization %q", auth)
	}
	if body != "spans" {
		t.Fatalf("body %q", body)
	}
}

// OTEL_SERVICE_NAME (what the CDK app sets, with the stage) names the
// process instead of its default service name.
func TestSetupTakesTheServiceNameFromTheEnvironment(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	env := map[string]string{"OTEL_SERVICE_NAME": "maestro-engine-dev"}
	tp, err := tracing.Setup(context.Background(), tracing.ServiceEngine, tracing.Options{Exporter: exp, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tracing.Shutdown(context.Background(), tp) }()
	_, span := tracing.Tracer().Start(context.Background(), "root")
	span.End()
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans := exp.GetSpans(); len(spans) != 1 || !strings.Contains(spans[0].Resource.String(), "service.name=maestro-engine-dev") {
		t.Errorf("spans %v, want one of the service maestro-engine-dev", spans)
	}
}

// X-Ray's OTLP endpoint is recognised in every region and nothing else is.
func TestXRayEndpoint(t *testing.T) {
	for endpoint, want := range map[string]bool{
		"https://xray.eu-west-1.amazonaws.com/v1/traces":     true,
		"https://xray.us-east-1.amazonaws.com:443/v1/traces": true,
		"http://localhost:4318/v1/traces":                    false,
		"https://xray.eu-west-1.example.com/v1/traces":       false,
		"https://collector.internal:4318":                    false,
		"::not a url":                                        false,
	} {
		if got := tracing.XRayEndpoint(endpoint); got != want {
			t.Errorf("XRayEndpoint(%q) = %v, want %v", endpoint, got, want)
		}
	}
}

// BenchmarkStepSpan is what a step runtime call's span costs the engine
// (engine/flow/stepcall.go): a child of the run's stored traceparent, with
// the provider Setup installs and no exporter (ids, never sampled).
func BenchmarkStepSpan(b *testing.B) {
	tp, err := tracing.Setup(context.Background(), tracing.ServiceEngine, tracing.Options{Getenv: func(string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tracing.Shutdown(context.Background(), tp) }()
	ctx := tracing.WithTraceparent(context.Background(), "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01")
	b.ReportAllocs()
	for b.Loop() {
		_, span := tracing.Tracer().Start(ctx, "step execute")
		span.End()
	}
}
