package api_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
)

// yamlBomb is a YAML "billion laughs" of a few hundred bytes.
func yamlBomb(t testing.TB) string {
	data, err := os.ReadFile("../workflow/testdata/hostile/alias-bomb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Issue 15, defect 2: twenty alias bombs at once used to take the API to
// 2.9 GB. Each is now a 400 that costs next to nothing.
func TestYAMLBombsAtOnceCostLittle(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	e := newTestServer(t)
	bomb := yamlBomb(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Go(func() {
			path := "/api/v3/workflows/yaml"
			if i%2 == 1 {
				path = "/api/v3/workflows/actions/validate/yaml"
			}
			method := map[bool]string{true: "PUT", false: "POST"}[i%2 == 1]
			codes[i] = e.send(method, path, "alice", bomb).code
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	for i, c := range codes {
		if c != http.StatusBadRequest {
			t.Errorf("bomb %d answered %d", i, c)
		}
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("20 bombs allocated %d MB", alloc>>20)
	}
}

// Issue 15, defect 3: a request id the index cannot hold was a 500 marked
// retryable, which a client retries forever. Over the limit it is a 400
// that is not retryable; up to it, the start works.
func TestLongRequestIDIsBadRequest(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send("POST", "/api/v3/workflows", "alice", simple("wf", "v1")).expect(t, 200)
	start := "/api/v3/workflows/wf/versions/latest/actions/start"
	for _, n := range []int{2800, execution.MaxRequestIDLength + 1} {
		r := e.send("POST", start, "alice", fmt.Sprintf(`{"request_id": %q}`, strings.Repeat("r", n))).expect(t, 400)
		if r.body["retryable"] != false || !strings.Contains(r.body["message"].(string), "request_id") {
			t.Fatalf("%d bytes: %s", n, r.raw)
		}
	}
	id := strings.Repeat("r", execution.MaxRequestIDLength)
	e.send("POST", start, "alice", fmt.Sprintf(`{"request_id": %q}`, id)).expect(t, 200)
	e.send("POST", start, "alice", fmt.Sprintf(`{"request_id": %q}`, id)).expect(t, 200)
	r := e.send("POST", "/api/v3/signals", "alice", fmt.Sprintf(`{"name":"s","request_id": %q}`, strings.Repeat("q", 3000))).expect(t, 400)
	if r.body["retryable"] != false {
		t.Fatalf("signal: %s", r.raw)
	}
	if n := e.count(`SELECT count(*) FROM workflow_instance`); n != 1 {
		t.Fatalf("%d runs", n)
	}
}

// Issue 15, defect 5: while the database is unreachable the API answers 503
// with retryable true; an unexpected failure is a 500 that is not
// retryable.
func TestDatabaseDownIs503(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	defs := definition.NewStore(pool)
	h, err := api.New(api.Config{DB: pool, Logger: discardLogger(), Definitions: defs,
		Runs: execution.New(pool, defs, 0), TrustUserHeader: true})
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, h: h}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v3/workflows/wf/versions/latest/actions/start", `{}`},
		{"GET", "/api/v3/workflows/wf/instances/1", ""},
		{"GET", "/api/v3/workflows/wf/versions/latest", ""},
		{"POST", "/api/v3/workflows", simple("wf", "v1")},
		{"GET", "/api/v3/health", ""},
	} {
		r := e.send(c.method, c.path, "alice", c.body)
		if r.code != http.StatusServiceUnavailable || r.body["retryable"] != true || r.body["status"] != "SERVICE_UNAVAILABLE" {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.code, r.raw)
		}
	}

	// A failure that is no outage: the instances table is gone.
	broken := newTestServer(t)
	broken.send("POST", "/api/v3/workflows", "alice", simple("wf", "v1")).expect(t, 200)
	if _, err := broken.pool.Exec(context.Background(), `ALTER TABLE workflow_instance RENAME TO gone`); err != nil {
		t.Fatal(err)
	}
	r := broken.send("GET", "/api/v3/workflows/wf/instances/1", "alice", "").expect(t, 500)
	if r.body["retryable"] != false || strings.Contains(string(r.raw), "gone") || strings.Contains(string(r.raw), "workflow_instance") {
		t.Fatalf("internal error: %s", r.raw)
	}
}

// Issue 15, defect 5: a start body refuses unknown fields and text that is
// not UTF-8 (Go's decoder would store U+FFFD instead), and takes Maestro's
// own fields.
func TestStartBodyIsStrict(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send("POST", "/api/v3/workflows", "alice", `{"workflow":{"id":"wf","params":{"p":{"type":"STRING","value":"x"}},
		"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`).expect(t, 200)
	start := "/api/v3/workflows/wf/versions/latest/actions/start"
	for _, bad := range []string{
		`{"run_params": {}, "colour": "blue"}`,
		`{"request_id": "a\xffb"}`,
		"{\"run_params\": {\"p\": {\"type\": \"STRING\", \"value\": \"\xc3\x28\"}}}",
		`{"request_id": "a"} {"request_id": "b"}`,
		`{"runtime_tags": [{"name": " "}]}`,
		`{"runtime_tags": ["t", "t"]}`,
		`{"artifacts": {"a": 1}}`,
		`{"artifacts": ["a"]}`,
		`{"initiator": {"type": "TIME"}}`,
	} {
		r := e.send("POST", start, "alice", bad).expect(t, 400)
		if r.body["retryable"] != false {
			t.Fatalf("%q: %s", bad, r.raw)
		}
	}
	if n := e.count(`SELECT count(*) FROM workflow_instance`); n != 0 {
		t.Fatalf("refused starts created %d runs", n)
	}
	// Maestro's sample start request.
	e.send("POST", start, "alice", `{"initiator": {"type": "manual"}, "request_id": "97a57978-803f-403e-9f9b-376d34689723",
		"request_time": 1700000000000, "persist_failed_run": true, "runtime_tags": null, "artifacts": {},
		"run_params": {"p": {"value": "bar", "type": "STRING"}}}`).expect(t, 200)
	// Too many run params.
	var ps []string
	for i := range execution.MaxRunParams + 1 {
		ps = append(ps, fmt.Sprintf(`"p%d": {"type": "LONG", "value": %d}`, i, i))
	}
	e.send("POST", start, "alice", `{"run_params": {`+strings.Join(ps, ",")+`}}`).expect(t, 400)
}
