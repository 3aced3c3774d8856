package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/tracing"
)

// One run followed from the REST call to its events (docs/tracing.md): a
// start through the API, traced as API Gateway passes the trace
// (X-Amzn-Trace-Id), runs on an engine in this process; the request's span,
// the engine's span for the run's start message (a child of the request's),
// the spans of its steps' runtime calls and the run's events, read back as
// the forwarder reads them, all carry the trace id of the header.
//
// Not parallel: it installs the process's tracer provider.
func TestStartIsOneTraceFromRequestToEvents(t *testing.T) {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	prev := otel.GetTracerProvider()
	tp, err := tracing.Setup(ctx, tracing.ServiceEngine, tracing.Options{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tracing.Shutdown(ctx, tp); otel.SetTracerProvider(prev) })

	e := newTestServer(t)
	e.h = tracing.Middleware(e.h)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"properties":{"owner":"alice"},"workflow":{"id":"traced","steps":[
		{"step":{"id":"first","type":"NoOp","transition":{"successors":{"nap":"true"}}}},
		{"step":{"id":"nap","type":"Sleep","sleep_seconds":0.01}}]}}`).expect(t, http.StatusOK)

	const traceID = "5759e988bd862e3fe1be46a994272793"
	req := httptest.NewRequest(http.MethodPost, "/api/v3/workflows/traced/versions/latest/actions/start", nil)
	req.Header.Set("user", "alice")
	req.Header.Set(tracing.XRayHeader, "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	started := e.serve(req).expect(t, http.StatusOK)
	id := started.num(t, "workflow_instance_id")
	if got := e.waitTerminal("/api/v3/workflows/traced/instances/1"); got.body["status"] != "SUCCEEDED" {
		t.Fatalf("run %d: %s", id, got.raw)
	}
	// A step's span ends after its result is written; the run is terminal
	// only after both steps' results, so every span has ended by now.
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	var request trace.SpanContext
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID().String() != traceID {
			continue
		}
		byName[s.Name] = append(byName[s.Name], s)
		if s.Name == "POST /api/v3/workflows/traced/versions/latest/actions/start" {
			request = s.SpanContext
			if s.Parent.SpanID().String() != "53995c3f42cd8ad8" || s.SpanKind != trace.SpanKindServer {
				t.Errorf("request span: parent %s, kind %s; want the header's segment 53995c3f42cd8ad8, server", s.Parent.SpanID(), s.SpanKind)
			}
		}
	}
	if !request.IsValid() {
		t.Fatalf("no request span in trace %s; spans of the trace: %v", traceID, names(byName))
	}
	starts := byName["queue start_workflow"]
	if len(starts) != 1 || starts[0].Parent.SpanID() != request.SpanID() || starts[0].SpanKind != trace.SpanKindConsumer {
		t.Errorf("start message spans %+v, want one consumer span, the child of the request's %s", starts, request.SpanID())
	}
	// Each step's runtime calls: NoOp runs inline (start only), Sleep on
	// the worker pool (start, then execute until it is done).
	steps := map[string]int{}
	for _, name := range []string{"step start", "step execute"} {
		for _, s := range byName[name] {
			for _, a := range s.Attributes {
				if a.Key == "maestro.step_id" {
					steps[a.Value.AsString()]++
				}
			}
		}
	}
	if steps["first"] < 1 || steps["nap"] < 2 {
		t.Errorf("step call spans by step %v in the run's trace, want first's start and nap's start and execute (all: %v)", steps, names(byName))
	}

	// The run's events, as the SQS forwarder reads them, carry the trace.
	// The forwarder reads an event once no older transaction of the cluster
	// is open (event.ReadAfter): poll, since other tests share the cluster.
	instanceKind, _ := event.KindOf(event.WorkflowInstanceStatusChange)
	stepKind, _ := event.KindOf(event.StepInstanceStatusChange)
	var runEvents []event.Event
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		evs, err := event.ReadAfter(ctx, e.pool, event.Position{}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		runEvents = runEvents[:0]
		for _, ev := range evs {
			if ev.WorkflowID == "traced" && (ev.Kind == instanceKind || ev.Kind == stepKind) {
				runEvents = append(runEvents, ev) // the workflow's own events (definition, version) belong to no run
			}
		}
		// Run CREATED -> IN_PROGRESS -> SUCCEEDED and both steps' status changes.
		if len(runEvents) >= 4 || time.Now().After(deadline) {
			break
		}
	}
	if len(runEvents) < 4 {
		t.Errorf("%d events of the run, want at least 4", len(runEvents))
	}
	for _, ev := range runEvents {
		if len(ev.TraceContext) != 55 || ev.TraceContext[3:35] != traceID {
			t.Errorf("event %s (kind %d) trace context %q, want trace %s", ev.EventID(), ev.Kind, ev.TraceContext, traceID)
		}
	}
}

func names(byName map[string][]tracetest.SpanStub) map[string]int {
	out := map[string]int{}
	for n, s := range byName {
		out[n] = len(s)
	}
	return out
}
