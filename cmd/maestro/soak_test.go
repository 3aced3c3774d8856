package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
)

// TestSoak is issue 15's soak (make soak; docs/limits.md): on 127.0.0.1,
// an engine capped at 1 GiB and two API processes take MAESTRO_SOAK_PER_KIND
// (default 1,000) hostile requests of every kind the issue lists, while
// ordinary runs are started beside them. No process may exit, the engine's
// RSS stays under its cap, every hostile request gets its 4xx (or, for
// hostile runs, its run fails or succeeds as it should), and every ordinary
// run succeeds. It needs a writable cgroup for the cap, and is run only
// with MAESTRO_SOAK=1.
func TestSoak(t *testing.T) {
	if os.Getenv("MAESTRO_SOAK") == "" {
		t.Skip("set MAESTRO_SOAK=1 (or run make soak) to run the soak")
	}
	perKind := 1000
	if n, err := strconv.Atoi(os.Getenv("MAESTRO_SOAK_PER_KIND")); err == nil && n > 0 {
		perKind = n
	}
	const capBytes = 1 << 30
	dsn := dbtest.URL(t)
	ctx := context.Background()
	pool := openPool(t, dsn)

	eng := startCappedEngine(t, capBytes, dsn, "soak-engine")
	apis := []*serverProcess{startAPIProcess(t, dsn), startAPIProcess(t, dsn)}
	s := &soak{t: t, apis: apis, client: &http.Client{Timeout: 60 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}}

	// The workflows, all alice's.
	for _, def := range soakWorkflows {
		if code, body := s.do(0, "alice", "POST", "/api/v3/workflows", def); code != 200 {
			t.Fatalf("push: %d %s", code, body)
		}
	}

	kinds := soakKinds(t)
	type job struct {
		kind *soakKind
		i    int
	}
	var jobs []job
	for _, k := range kinds {
		for i := range perKind {
			jobs = append(jobs, job{k, i})
		}
	}
	rand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })

	start := time.Now()
	var wg sync.WaitGroup
	// Ordinary runs, started alongside, one every few hostile requests.
	ordinary := max(perKind/5, 20)
	wg.Go(func() {
		for i := range ordinary {
			code, body := s.do(i, "alice", "POST", "/api/v3/workflows/ordinary/versions/latest/actions/start", "")
			if code != 200 {
				s.fail("ordinary start", code, body)
			}
			time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
		}
	})
	// Slow clients hold connections in a pool of their own.
	slow := make(chan int)
	for range 50 {
		wg.Go(func() {
			for i := range slow {
				s.slowClient(i)
			}
		})
	}
	wg.Go(func() {
		for i := range perKind {
			slow <- i
		}
		close(slow)
	})
	work := make(chan job)
	for range 24 {
		wg.Go(func() {
			for j := range work {
				code, body := j.kind.send(s, j.i)
				j.kind.sent.Add(1)
				if !j.kind.ok(code) {
					s.fail(j.kind.name, code, body)
				}
			}
		})
	}
	for _, j := range jobs {
		eng.alive(t)
		work <- j
	}
	close(work)
	wg.Wait()
	hostileDone := time.Since(start)
	for _, k := range kinds {
		t.Logf("%-28s %5d requests", k.name, k.sent.Load())
	}
	t.Logf("slow clients %d; %d hostile requests in %s", s.slowDone.Load(), len(jobs)+int(s.slowDone.Load()), hostileDone.Round(time.Second))

	// Every run ends as it should.
	deadline := time.Now().Add(15 * time.Minute)
	for {
		eng.alive(t)
		for _, a := range apis {
			a.alive(t)
		}
		var live int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instance WHERE status IN ('CREATED', 'IN_PROGRESS', 'PAUSED')`).Scan(&live); err != nil {
			t.Fatal(err)
		}
		if live == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs still live after %s", live, time.Since(start).Round(time.Second))
		}
		time.Sleep(500 * time.Millisecond)
	}
	allDone := time.Since(start)
	rows, err := pool.Query(ctx, `SELECT workflow_id, status, count(*), count(*) FILTER (WHERE timeline::text LIKE '%more than 750000%'),
            count(*) FILTER (WHERE initiator->>'user' = 'alice') FROM workflow_instance GROUP BY 1, 2 ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]int{}
	for rows.Next() {
		var wf, status string
		var n, limited, byAlice int
		if err := rows.Scan(&wf, &status, &n, &limited, &byAlice); err != nil {
			t.Fatal(err)
		}
		t.Logf("runs of %-10s %-10s %5d (%d name the 750000-byte limit, %d initiated by alice)", wf, status, n, limited, byAlice)
		if got[wf] == nil {
			got[wf] = map[string]int{}
		}
		got[wf][status] = n
		if byAlice != n {
			t.Errorf("%d runs of %s %s were not recorded as alice's", n-byAlice, wf, status)
		}
		if (wf == "huge" && limited != n) || (wf != "huge" && wf != "huge_step" && status != "SUCCEEDED") {
			t.Errorf("%d runs of %s ended %s", n, wf, status)
		}
	}
	rows.Close()
	for wf, want := range map[string]int{"ordinary": ordinary, "huge": perKind, "huge_step": perKind, "hog": perKind,
		"wide": perKind, "forged": perKind} {
		status := "SUCCEEDED"
		if wf == "huge" || wf == "huge_step" {
			status = "FAILED"
		}
		if got[wf][status] != want {
			t.Errorf("%s: %d runs %s, want %d", wf, got[wf][status], status, want)
		}
	}

	eng.alive(t)
	engRSS := eng.rss.Max()
	t.Logf("engine: RSS peak %d MiB under a %d MiB cap (cgroup peak %d MiB, page cache included), %d OOM kills",
		engRSS>>20, capBytes>>20, eng.cap.peak()>>20, eng.cap.ooms())
	for i, a := range apis {
		a.alive(t)
		t.Logf("api %d: RSS peak %d MiB", i+1, a.rss.Max()>>20)
	}
	t.Logf("hostile phase %s, every run ended %s after the start", hostileDone.Round(time.Second), allDone.Round(time.Second))
	if engRSS >= capBytes || eng.cap.ooms() != 0 {
		t.Errorf("the engine's RSS reached %d MiB (%d OOM kills)", engRSS>>20, eng.cap.ooms())
	}
	s.report()
}

// soakWorkflows are alice's workflows the soak uses.
var soakWorkflows = []string{
	`{"properties":{"owner":"alice","run_strategy":"PARALLEL"},"workflow":{"id":"ordinary","params":{"n":{"type":"LONG","value":3}},"steps":[
		{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"n > 0"}}}},
		{"step":{"id":"b","type":"Sleep","sleep_seconds":0.2,"transition":{"successors":{"c":"true"}}}},
		{"step":{"id":"c","type":"NoOp","params":{"twice":{"type":"LONG","expression":"n * 2"}}}}]}}`,
	`{"properties":{"owner":"alice","run_strategy":"PARALLEL"},"workflow":{"id":"huge",
		"params":{"big":{"type":"STRING_ARRAY","expression":"` + hugeArrayExpr + `"}},"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`,
	`{"properties":{"owner":"alice","run_strategy":"PARALLEL"},"workflow":{"id":"huge_step","steps":[{"step":{"id":"s","type":"NoOp",
		"retry_policy":{"error_retry_limit":0},"params":{"big":{"type":"STRING_ARRAY","expression":"` + hugeArrayExpr + `"}}}}]}}`,
	// About 40 MB allocated by each evaluation, legally.
	`{"properties":{"owner":"alice","run_strategy":"PARALLEL"},"workflow":{"id":"hog","params":{"n":{"type":"LONG",
		"expression":"String[] a = new String[40]; for (int i = 0; i < 40; i++) { a[i] = \"z\".repeat(1000000) + i; } return a.length;"}},
		"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`,
	// A 200 KB literal param: each run holds it.
	`{"properties":{"owner":"alice","run_strategy":"PARALLEL"},"workflow":{"id":"wide","params":{"blob":{"type":"STRING","value":"` +
		strings.Repeat("w", 200_000) + `"}},"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`,
	`{"properties":{"owner":"alice","run_strategy":"PARALLEL"},"workflow":{"id":"forged","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`,
}

// soakKind is one kind of hostile request.
type soakKind struct {
	name string
	send func(s *soak, i int) (int, string)
	ok   func(code int) bool
	sent atomic.Int64
}

func is(codes ...int) func(int) bool {
	return func(c int) bool {
		for _, w := range codes {
			if c == w {
				return true
			}
		}
		return false
	}
}

func soakKinds(t *testing.T) []*soakKind {
	start := func(wf string) func(s *soak, i int) (int, string) {
		return func(s *soak, i int) (int, string) {
			return s.do(i, "alice", "POST", "/api/v3/workflows/"+wf+"/versions/latest/actions/start", "")
		}
	}
	bombYAML, err := os.ReadFile("../../engine/workflow/testdata/hostile/alias-bomb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bomb := string(bombYAML)
	longID := strings.Repeat("r", 2800)
	bigSignal := `{"name":"s","payload":{"x":"` + strings.Repeat("p", 100_000) + `"}}`
	unauthorized := []struct{ method, path, body string }{
		{"PUT", "/api/v3/workflows/ordinary/actions/stop", ""},
		{"PUT", "/api/v3/workflows/ordinary/actions/kill", ""},
		{"POST", "/api/v3/workflows/ordinary/versions/latest/actions/start", `{"initiator":{"type":"MANUAL","user":"alice"}}`},
		{"POST", "/api/v3/workflows/ordinary/properties", `{"owner":"mallory"}`},
		{"DELETE", "/api/v3/workflows/ordinary", ""},
		{"PUT", "/api/v3/workflows/ordinary/instances/1/actions/kill", ""},
		{"POST", "/api/v3/workflows/steps/breakpoints", `{"workflow_id":"ordinary","step_id":"b"}`},
		{"POST", "/api/v3/workflows", `{"workflow":{"id":"ordinary","steps":[{"step":{"id":"x","type":"NoOp"}}]}}`},
	}
	malformed := []struct {
		path, body string
		code       int
	}{
		{"/api/v3/workflows/ordinary/versions/latest/actions/start", `{"colour":"blue"}`, 400},
		{"/api/v3/workflows/ordinary/versions/latest/actions/start", "{\"request_id\":\"\xff\xfe\"}", 400},
		{"/api/v3/workflows/ordinary/versions/latest/actions/start", `{"request_id":"a"} trailing`, 400},
		{"/api/v3/workflows/ordinary/versions/latest/actions/start", `{"initiator":{"type":"TIME"}}`, 400},
		{"/api/v3/workflows/ordinary/versions/latest/actions/start", `{"run_params":`, 400},
		{"/api/v3/workflows", `{"workflow":{"id":"x","description":"` + strings.Repeat("d", 300_000) + `"}}`, 413},
		{"/api/v3/workflows", `{"workflow":{"id":"x\u0000","steps":[]}}`, 400},
	}
	return []*soakKind{
		{name: "run with a 98 MB param", send: start("huge"), ok: is(200)},
		{name: "run with a 98 MB step param", send: start("huge_step"), ok: is(200)},
		{name: "run allocating 40 MB in SEL", send: start("hog"), ok: is(200)},
		{name: "run holding 200 KB params", send: start("wide"), ok: is(200)},
		{name: "YAML alias bomb", send: func(s *soak, i int) (int, string) {
			if i%2 == 0 {
				return s.do(i, "alice", "POST", "/api/v3/workflows/yaml", bomb)
			}
			return s.do(i, "mallory", "PUT", "/api/v3/workflows/actions/validate/yaml", bomb)
		}, ok: is(400)},
		{name: "2.8 KB request id", send: func(s *soak, i int) (int, string) {
			return s.do(i, "alice", "POST", "/api/v3/workflows/ordinary/versions/latest/actions/start", `{"request_id":"`+longID+`"}`)
		}, ok: is(400)},
		{name: "someone else's workflow", send: func(s *soak, i int) (int, string) {
			u := unauthorized[i%len(unauthorized)]
			return s.do(i, "mallory", u.method, u.path, u.body)
		}, ok: is(403)},
		{name: "forged initiator", send: func(s *soak, i int) (int, string) {
			return s.do(i, "alice", "POST", "/api/v3/workflows/forged/versions/latest/actions/start",
				`{"initiator":{"type":"MANUAL","user":"root"}}`)
		}, ok: is(200)},
		{name: "malformed body", send: func(s *soak, i int) (int, string) {
			m := malformed[i%len(malformed)]
			code, body := s.do(i, "alice", "POST", m.path, m.body)
			if code != m.code {
				return -code, body
			}
			return code, body
		}, ok: func(c int) bool { return c > 0 }},
		{name: "oversized signal", send: func(s *soak, i int) (int, string) {
			switch i % 3 {
			case 0:
				return s.do(i, "mallory", "POST", "/api/v3/signals", bigSignal)
			case 1:
				return s.do(i, "mallory", "POST", "/api/v3/signals", `{"name":"`+strings.Repeat("n", 300)+`"}`)
			}
			return s.do(i, "mallory", "POST", "/api/v3/signals", `{"name":"s","request_id":"`+longID+`"}`)
		}, ok: is(400)},
		{name: "oversized output data", send: func(s *soak, i int) (int, string) {
			return s.do(i, "mallory", "PUT", "/api/v3/output-data", `{"workflow_id":"ordinary","workflow_instance_id":1,
				"workflow_run_id":1,"step_id":"b","step_attempt_id":1,"step_instance_uuid":"x",
				"params":{"p":{"type":"STRING","value":"`+strings.Repeat("o", 240_000)+`"}}}`)
		}, ok: is(400, 403, 404, 409)},
	}
}

// soak is the client side of the soak.
type soak struct {
	t        *testing.T
	apis     []*serverProcess
	client   *http.Client
	mu       sync.Mutex
	failures []string
	nfail    int
	slowDone atomic.Int64
}

// do sends a request to API process i % 2 as user.
func (s *soak) do(i int, user, method, path, body string) (int, string) {
	req, err := http.NewRequest(method, "http://"+s.apis[i%len(s.apis)].addr+path, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("user", user)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode >= 400 {
		var e struct {
			Retryable bool `json:"retryable"`
		}
		if json.Unmarshal(data, &e) == nil && e.Retryable && resp.StatusCode != 503 {
			return -resp.StatusCode, "retryable " + string(data)
		}
	}
	return resp.StatusCode, string(data)
}

// slowClient promises a body and stalls: the server must cut it off.
func (s *soak) slowClient(i int) {
	defer s.slowDone.Add(1)
	conn, err := net.Dial("tcp", s.apis[i%len(s.apis)].addr)
	if err != nil {
		s.fail("slow client dial", 0, err.Error())
		return
	}
	defer conn.Close()
	req := "POST /api/v3/workflows HTTP/1.1\r\nHost: x\r\nuser: alice\r\nContent-Length: 5000\r\n\r\n{\"workflow\":"
	if _, err := conn.Write([]byte(req)); err != nil {
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			s.fail("slow client", 0, "the server kept a stalled request open for 30 s")
		}
	}
}

func (s *soak) fail(kind string, code int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nfail++
	if len(s.failures) < 20 {
		if len(body) > 300 {
			body = body[:300]
		}
		s.failures = append(s.failures, fmt.Sprintf("%s: %d %s", kind, code, body))
	}
}

func (s *soak) report() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.failures {
		s.t.Error(f)
	}
	if s.nfail > 0 {
		s.t.Errorf("%d requests did not get the answer they should", s.nfail)
	}
}

// startAPIProcess runs `maestro api` against dsn, trusting the user
// header, with MAESTRO_ADMINS=root.
func startAPIProcess(t *testing.T, dsn string) *serverProcess {
	t.Helper()
	return startServer(t, []string{"api", "--trust-user-header", "--read-timeout", "3s", "--read-header-timeout", "3s"},
		"DATABASE_URL="+dsn, "MAESTRO_GROUP_COUNT=4", "MAESTRO_ADMINS=root")
}
