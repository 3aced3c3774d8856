package httpstep_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
	"github.com/maestro-aws/maestro/engine/stepruntime/httpstep"
)

// server records the requests it gets and answers with handler.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	keys     map[string]int
	bodies   []string
	requests atomic.Int64
}

func newServer(t *testing.T, handler http.HandlerFunc) *server {
	s := &server{keys: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.keys[r.Header.Get(httpstep.IdempotencyHeader)]++
		s.bodies = append(s.bodies, r.Method+" "+r.URL.Path+" "+string(b))
		s.mu.Unlock()
		s.requests.Add(1)
		handler(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// seen returns how often each idempotency key came, and the requests.
func (s *server) seen() (map[string]int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.keys), slices.Clone(s.bodies)
}

// attempt builds an attempt with an http param and a Record that keeps
// what it is given.
func attempt(spec map[string]any, extra map[string]any) (*stepruntime.Attempt, *[]map[string]any) {
	recorded := &[]map[string]any{}
	p := map[string]any{"http": spec}
	for k, v := range extra {
		p[k] = v
	}
	a := &stepruntime.Attempt{WorkflowID: "wf", InstanceID: 1, RunID: 1, StepID: "call", AttemptID: 1,
		Type: "Http", UUID: uuid.NewString(), Params: p}
	a.Record = func(_ context.Context, data map[string]any) error {
		*recorded = append(*recorded, data)
		return nil
	}
	return a, recorded
}

// drive drives the runtime as the engine does: Start, then Execute until it
// is not Continue.
func drive(t *testing.T, rt stepruntime.Runtime, a *stepruntime.Attempt) stepruntime.Result {
	t.Helper()
	ctx := context.Background()
	if r := rt.Start(ctx, a); r.State != stepruntime.Done {
		return r
	}
	for range 10 {
		r := rt.Execute(ctx, a)
		if r.Data != nil {
			a.Data = r.Data
		}
		if r.State != stepruntime.Continue {
			return r
		}
	}
	t.Fatal("Execute never ended")
	return stepruntime.Result{}
}

func TestSuccessSendsOnceWithIdempotencyKeyAndReturnsOutputs(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") != "abc" || r.Header.Get("Content-Type") != "text/plain" {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("X-Request-Id", "r-1")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"id": 42, "name": "job", "tags": ["a", "b"]}`)
	})
	rt := httpstep.New(httpstep.Config{})
	a, recorded := attempt(map[string]any{"url": srv.URL + "/jobs", "method": "post",
		"headers": map[string]string{"X-Token": "abc", "Content-Type": "text/plain"}, "body": "hello"}, nil)
	r := drive(t, rt, a)
	if r.State != stepruntime.Done {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
	keys, bodies := srv.seen()
	if keys[a.UUID] != 1 || len(keys) != 1 {
		t.Errorf("idempotency keys seen %v, want the attempt uuid %s once", keys, a.UUID)
	}
	if bodies[0] != "POST /jobs hello" {
		t.Errorf("request %q", bodies[0])
	}
	if len(*recorded) != 1 || (*recorded)[0][external.KeyLaunch] != external.LaunchIntended ||
		(*recorded)[0][external.KeyIdempotency] != a.UUID {
		t.Errorf("recorded before the call: %v", *recorded)
	}
	if r.Data[external.KeyLaunch] != external.LaunchDone || r.Data["status_code"] != int64(201) {
		t.Errorf("data %v", r.Data)
	}
	out := func(name string) any { return r.Outputs[name].(params.Value).Value }
	if out(httpstep.OutputStatusCode) != int64(201) {
		t.Errorf("status_code %v", out(httpstep.OutputStatusCode))
	}
	if !strings.Contains(out(httpstep.OutputResponseBody).(string), `"id": 42`) {
		t.Errorf("response_body %v", out(httpstep.OutputResponseBody))
	}
	if out(httpstep.OutputResponseHeaders).(map[string]string)["X-Request-Id"] != "r-1" {
		t.Errorf("response_headers %v", out(httpstep.OutputResponseHeaders))
	}
	js := out(httpstep.OutputResponseJSON).(map[string]any)
	if js["id"] != int64(42) || js["name"] != "job" {
		t.Errorf("response_json %v", js)
	}
}

func TestStatusClasses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int
		spec   map[string]any
		params map[string]any
		want   stepruntime.State
	}{
		{"2xx done", 204, nil, nil, stepruntime.Done},
		{"4xx user error", 404, nil, nil, stepruntime.UserError},
		{"5xx platform error", 503, nil, nil, stepruntime.PlatformError},
		{"3xx is not followed", 302, nil, nil, stepruntime.UserError},
		{"accepted codes", 404, map[string]any{"accepted_status_codes": []int64{200, 404}}, nil, stepruntime.Done},
		{"2xx outside accepted codes", 200, map[string]any{"accepted_status_codes": []int64{202}}, nil, stepruntime.UserError},
		{"state_expr as in Maestro", 404, nil, map[string]any{"state_expr": `if (status_code == 404) return "DONE"; else return "FATAL_ERROR";`}, stepruntime.Done},
		{"state_expr fatal", 200, nil, map[string]any{"state_expr": `if (status_code == 404) return "DONE"; else return "FATAL_ERROR";`}, stepruntime.FatalError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", "/elsewhere")
				w.WriteHeader(tc.code)
				_, _ = io.WriteString(w, "detail of the answer")
			})
			spec := map[string]any{"url": srv.URL}
			for k, v := range tc.spec {
				spec[k] = v
			}
			a, _ := attempt(spec, tc.params)
			r := drive(t, httpstep.New(httpstep.Config{}), a)
			if r.State != tc.want {
				t.Fatalf("state %s, want %s: %s", r.State, tc.want, r.Message)
			}
			if r.State != stepruntime.Done && !strings.Contains(r.Message, "detail of the answer") {
				t.Errorf("message %q lacks the body", r.Message)
			}
			if srv.requests.Load() != 1 {
				t.Errorf("%d requests", srv.requests.Load())
			}
		})
	}
}

func TestRequestTimeoutIsPlatformError(t *testing.T) {
	release := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	a, _ := attempt(map[string]any{"url": srv.URL, "timeout": "200ms"}, nil)
	start := time.Now()
	r := drive(t, httpstep.New(httpstep.Config{}), a)
	if r.State != stepruntime.PlatformError || !strings.Contains(r.Message, "no response within 200ms") {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %s", time.Since(start))
	}
}

func TestCancelledMidCallStops(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	rt := httpstep.New(httpstep.Config{})
	a, _ := attempt(map[string]any{"url": srv.URL}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	r := rt.Execute(ctx, a)
	if r.State != stepruntime.Stopped {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
}

// An intent recorded by an engine that stopped before the answer came is
// never sent again in the same attempt.
func TestInterruptedAttemptIsNotSentTwice(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	a, _ := attempt(map[string]any{"url": srv.URL}, nil)
	a.Data = map[string]any{external.KeyLaunch: external.LaunchIntended, external.KeyIdempotency: a.UUID}
	r := httpstep.New(httpstep.Config{}).Execute(context.Background(), a)
	if r.State != stepruntime.PlatformError || !strings.Contains(r.Message, "outcome is unknown") {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
	if srv.requests.Load() != 0 {
		t.Errorf("the request was sent again")
	}
}

// A node unsure of its lease records nothing and sends nothing; it tries
// again later.
func TestLeaseUncertainDefersTheCall(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	a, _ := attempt(map[string]any{"url": srv.URL}, nil)
	a.Record = func(context.Context, map[string]any) error { return stepruntime.ErrLeaseUncertain }
	r := httpstep.New(httpstep.Config{}).Execute(context.Background(), a)
	if r.State != stepruntime.Continue || r.NextPollDelay <= 0 {
		t.Fatalf("state %s after %s: %s", r.State, r.NextPollDelay, r.Message)
	}
	if _, ok := r.Data[external.KeyLaunch]; ok || r.Data == nil {
		t.Errorf("data %v keeps an intent", r.Data)
	}
	if srv.requests.Load() != 0 {
		t.Errorf("the request was sent")
	}
	a.Record = func(context.Context, map[string]any) error { return nil }
	a.Data = r.Data
	if r := httpstep.New(httpstep.Config{}).Execute(context.Background(), a); r.State != stepruntime.Done {
		t.Fatalf("second try: %s %s", r.State, r.Message)
	}
}

func TestBadConfigFailsAtStart(t *testing.T) {
	for name, tc := range map[string]struct {
		params map[string]any
		cfg    httpstep.Config
		want   string
	}{
		"no http param":      {map[string]any{}, httpstep.Config{}, "needs the \"http\" param"},
		"no url":             {map[string]any{"http": map[string]any{"method": "GET"}}, httpstep.Config{}, "http.url is required"},
		"bad scheme":         {map[string]any{"http": map[string]any{"url": "ftp://x/y"}}, httpstep.Config{}, "scheme"},
		"metadata endpoint":  {map[string]any{"http": map[string]any{"url": "http://169.254.169.254/latest/meta-data"}}, httpstep.Config{}, "link-local"},
		"unknown field":      {map[string]any{"http": map[string]any{"url": "http://x", "verb": "GET"}}, httpstep.Config{}, "http.verb: unknown field"},
		"bad method":         {map[string]any{"http": map[string]any{"url": "http://x", "method": "GE T"}}, httpstep.Config{}, "not an HTTP method"},
		"bad timeout":        {map[string]any{"http": map[string]any{"url": "http://x", "timeout": "soon"}}, httpstep.Config{}, "http.timeout"},
		"bad state_expr":     {map[string]any{"http": map[string]any{"url": "http://x"}, "state_expr": "return ("}, httpstep.Config{}, "state_expr"},
		"host not allowed":   {map[string]any{"http": map[string]any{"url": "http://evil.example.org/"}}, httpstep.Config{AllowedHosts: []string{"*.example.com"}}, "allowed hosts"},
		"bad accepted codes": {map[string]any{"http": map[string]any{"url": "http://x", "accepted_status_codes": []int64{42}}}, httpstep.Config{}, "not an HTTP status"},
	} {
		t.Run(name, func(t *testing.T) {
			a := &stepruntime.Attempt{Params: tc.params, UUID: uuid.NewString()}
			r := httpstep.New(tc.cfg).Start(context.Background(), a)
			if r.State != stepruntime.FatalError || !strings.Contains(r.Message, tc.want) {
				t.Fatalf("state %s: %q, want FATAL_ERROR with %q", r.State, r.Message, tc.want)
			}
		})
	}
	a := &stepruntime.Attempt{Params: map[string]any{"http": map[string]any{"url": "https://api.example.com/x"}}}
	if r := httpstep.New(httpstep.Config{AllowedHosts: []string{"*.example.com"}}).Start(context.Background(), a); r.State != stepruntime.Done {
		t.Errorf("an allowed host was refused: %s", r.Message)
	}
}

// The client refuses to connect to a link-local address however the URL
// names it (the dial itself is checked, after name resolution).
func TestLinkLocalRefusedOnConnect(t *testing.T) {
	c := httpstep.NewClient()
	for _, u := range []string{"http://169.254.169.254/latest/meta-data", "http://169.254.170.2/v2/credentials", "http://[fe80::1]/"} {
		_, err := c.Get(u)
		if err == nil || !strings.Contains(err.Error(), "link-local") {
			t.Errorf("GET %s: err = %v, want refused", u, err)
		}
	}
}

// Self-fencing (issue 18): a request is withheld when the node's lease may
// have run out after the intent was recorded, whether that is seen before
// the request is built or once its connection is in hand; the intent
// stays, so whoever runs the attempt next treats its outcome as unknown.
func TestRequestWithheldWhenTheLeaseIsGone(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	rt := httpstep.New(httpstep.Config{})
	for name, afterChecks := range map[string]int{"before the launch": 0, "once the connection is in hand": 1} {
		t.Run(name, func(t *testing.T) {
			a, _ := attempt(map[string]any{"url": srv.URL + "/x"}, nil)
			checks := 0
			a.LeaseHeld = func() bool {
				checks++
				return checks <= afterChecks
			}
			r := rt.Execute(context.Background(), a)
			if r.State != stepruntime.Continue || !strings.Contains(r.Message, "lease") {
				t.Fatalf("state %s: %s", r.State, r.Message)
			}
			if n := srv.requests.Load(); n != 0 {
				t.Errorf("%d requests sent without a lease", n)
			}
			if checks != afterChecks+1 {
				t.Errorf("lease asked %d times, want %d", checks, afterChecks+1)
			}
		})
	}
}

// The attempt's step token goes to the server in its header, which the
// step's own headers cannot replace, and nowhere in the attempt's data or
// outputs.
func TestStepTokenGoesToTheServerOnly(t *testing.T) {
	got := make(chan string, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(completion.TokenHeader)
		_, _ = io.WriteString(w, `{}`)
	})
	a, recorded := attempt(map[string]any{"url": srv.URL, "headers": map[string]string{completion.TokenHeader: "forged"}}, nil)
	a.CallbackToken = "secret-" + uuid.NewString()
	r := drive(t, httpstep.New(httpstep.Config{}), a)
	if r.State != stepruntime.Done {
		t.Fatalf("state %s: %s", r.State, r.Message)
	}
	if token := <-got; token != a.CallbackToken {
		t.Errorf("server got token %q, want the attempt's", token)
	}
	for _, v := range []any{r.Data, r.Outputs, r.Message, *recorded} {
		if b, _ := json.Marshal(v); strings.Contains(string(b), a.CallbackToken) {
			t.Errorf("the step token leaked into %s", b)
		}
	}
}
