package httpstep_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/httpstep"
)

// BenchmarkHttpSteps1000: 1,000 runs of a one-step workflow started at once
// (64 clients), in two sub-benchmarks measured the same way in one sitting,
// and a third for where an Http step's CPU goes:
//
//   - Http: the step calls a server that answers each request after 100
//     ms. The server runs in a process of its own (this test binary, run
//     again), so that this process's CPU is the engine's (and the API's and
//     the clients') alone.
//   - NoOp: the step is a NoOp, the floor an Http step is compared with.
//   - Exchange: no engine, only the Http step's client sending 1,000
//     requests at once to the same server (benchExchange): what net/http
//     costs this process per exchange (cpu-ms/request), and its share of
//     what an Http step costs beyond a NoOp
//     (exchange-share-of-http-added).
//
// The engine's added latency per Http step is the step's time from
// STARTING to SUCCEEDED (the transitions' times, reported once durable)
// less the time the server held the request: the Start call, the recorded
// intent (written with RUNNING, awaited), the waits for a worker, the
// connection, the response and its outputs. Targets (issue 28): overhead
// p50 <= 3 ms and p99 <= 30 ms with 1,000 in flight; CPU per Http step <=
// 1.5x a NoOp's (http-noop-cpu-ratio, reported by the Http sub-benchmark
// against the NoOp one run just before it).
//
// Reported: p50/p99-overhead-ms and, for where the time goes, the p50 and
// p99 of its parts: start (STARTING -> RUNNING: the Start call), commit
// (RUNNING -> the write of RUNNING with the intent durable: a worker, the
// actor's turn, the writer's queue and commit), launch (-> the client
// handed the request: the answer to the runtime, the request built),
// connect (-> the request's arrival at the server: a connection,
// the request written), reply (the server's handler done -> the client has
// the response: the server's flush, on a loaded machine mostly its turn
// for a CPU) and answer (-> SUCCEEDED: the body read, the outputs, the
// actor's turn); cpu-ms/step of
// this process and pg-cpu-ms/step of PostgreSQL, and cores in use;
// awaited-queued-ms and awaited-tx-ms, the engine writer's mean time of
// a write somebody waits for queued, then in its transaction, tx-beside
// the share of its transactions opened while another was in flight and
// writer-tx/step its transactions per step;
// commits/step, every transaction that wrote (the API's, the queue's, the
// engine's writer's) per step, and commit-floor-ms, the cheapest durable
// commit measured just before (dbtest.CommitFloor): the intent waits for
// at least one.
func BenchmarkHttpSteps1000(b *testing.B) {
	var noopCPU, httpCPU float64
	b.Run("NoOp", func(b *testing.B) {
		noopCPU = benchSteps(b, `{"step":{"id":"call","type":"NoOp"}}`, nil)
	})
	b.Run("Http", func(b *testing.B) {
		srv := startBenchServer(b)
		cpu := benchSteps(b, fmt.Sprintf(`{"step":{"id":"call","type":"Http",
		  "params":{"http":{"type":"MAP","value":{"url":{"type":"STRING","value":"%s/${workflow_instance_id}"}}}}}}`, srv.url), srv)
		if noopCPU > 0 {
			b.ReportMetric(cpu/noopCPU, "http-noop-cpu-ratio")
		}
		httpCPU = cpu
	})
	b.Run("Exchange", func(b *testing.B) {
		cpu := benchExchange(b, startBenchServer(b))
		if added := httpCPU - noopCPU; noopCPU > 0 && added > 0 {
			b.ReportMetric(cpu/added, "exchange-share-of-http-added")
		}
	})
}

// benchExchange sends 1,000 requests at once through the Http step's
// client (httpstep.NewClient: its dialer, its guarded connections, its
// limits) to the same server, with the headers a step sends, reads each
// body and returns this process's CPU per request in milliseconds: what
// net/http alone costs for an exchange of the Http sub-benchmark's kind,
// on a new connection each, without the engine. It is the floor under
// what an Http step costs beyond a NoOp (docs/performance.md).
func benchExchange(b *testing.B, srv *benchServer) float64 {
	const requests = 1000
	client := httpstep.NewClient()
	var cpu time.Duration
	b.ResetTimer()
	for b.Loop() {
		cpu0 := cpuTime()
		var wg sync.WaitGroup
		errs := make(chan error, requests)
		for i := range requests {
			wg.Go(func() {
				req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/%d", srv.url, i), nil)
				if err != nil {
					errs <- err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json")
				req.Header.Set("User-Agent", "maestro-aws")
				req.Header.Set(httpstep.IdempotencyHeader, strconv.Itoa(i))
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				_, err = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		cpu += cpuTime() - cpu0
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		// A new client's burst, as each Http sub-benchmark round is.
		client.CloseIdleConnections()
	}
	cpuMS := cpu.Seconds() / float64(b.N*requests) * 1000
	b.ReportMetric(cpuMS, "cpu-ms/request")
	return cpuMS
}

// benchSteps runs the benchmark's loop for one step definition and
// returns this process's CPU per step in milliseconds. srv, when not nil,
// is the server the steps call: the overhead figures are reported.
func benchSteps(b *testing.B, step string, srv *benchServer) float64 {
	const runs = 1000
	var mu sync.Mutex
	starting, running, done := map[run.Ref]time.Time{}, map[run.Ref]time.Time{}, map[run.Ref]time.Time{}
	recorded := map[run.Ref]time.Time{} // when the write of RUNNING with the intent was durable
	succeeded := make(chan struct{}, runs)
	env := flowtest.New(b)
	rts := stepruntime.Builtins()
	client := httpstep.NewClient()
	sent := map[int64]time.Time{}     // instance id -> when the client was handed the request
	received := map[int64]time.Time{} // instance id -> when the client had the response's head
	client.Transport = roundTripFunc(func(next http.RoundTripper) roundTripFunc {
		return func(r *http.Request) (*http.Response, error) {
			id, _ := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/"), 10, 64)
			mu.Lock()
			sent[id] = time.Now()
			mu.Unlock()
			resp, err := next.RoundTrip(r)
			mu.Lock()
			received[id] = time.Now()
			mu.Unlock()
			return resp, err
		}
	}(client.Transport))
	rts[httpstep.Type] = httpstep.New(httpstep.Config{Client: client})
	eng := env.Engine(rts, flow.Config{
		Workers: 2 * runs,
		Observer: func(ref run.Ref, _ string, _ int64, st instance.StepStatus, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			switch st {
			case instance.StepStarting:
				starting[ref] = at
			case instance.StepRunning:
				running[ref] = at
				recorded[ref] = time.Now() // the Observer is called once the write is durable
			case instance.StepSucceeded:
				done[ref] = at
				succeeded <- struct{}{}
			}
		},
	})
	env.Push(fmt.Sprintf(`{"properties":{"owner":"tester","run_strategy":{"rule":"PARALLEL","workflow_concurrency":%d}},
	  "workflow":{"id":"calls","steps":[%s]}}`, runs, step))

	ctx := context.Background()
	floor, err := writeCommitFloor(ctx, env.Pool, 50)
	if err != nil {
		b.Fatal(err)
	}
	var overhead, start, commit, launch, connect, reply, answer []time.Duration
	var cpu, pgCPU, wall time.Duration
	var commits int64
	var writer flow.WriterStats // summed over the rounds
	b.ResetTimer()
	for b.Loop() {
		x0, err := dbtest.WriteXacts(ctx, env.Pool)
		if err != nil {
			b.Fatal(err)
		}
		cpu0, pg0, wall0, ws0 := cpuTime(), dbtest.ServerCPU(), time.Now(), eng.WriterStats()
		insts := make([]*execution.Instance, runs)
		var wg sync.WaitGroup
		next := make(chan int)
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					insts[i] = env.Start("calls")
				}
			}()
		}
		for i := range runs {
			next <- i
		}
		close(next)
		wg.Wait()
		// Every step's end observed first (no polling while they run), then
		// each run's end.
		timeout := time.After(5 * time.Minute)
		for range runs {
			select {
			case <-succeeded:
			case <-timeout:
				b.Fatal("the steps did not all succeed within 5 minutes")
			}
		}
		for _, inst := range insts {
			if got := env.Wait(inst, 5*time.Minute); got.Status != instance.WorkflowSucceeded {
				b.Fatalf("run %d ended %s", inst.InstanceID, got.Status)
			}
		}
		ws := eng.WriterStats()
		writer.Transactions += ws.Transactions - ws0.Transactions
		writer.Beside += ws.Beside - ws0.Beside
		writer.Awaited += ws.Awaited - ws0.Awaited
		writer.AwaitedQueued += ws.AwaitedQueued - ws0.AwaitedQueued
		writer.AwaitedInTx += ws.AwaitedInTx - ws0.AwaitedInTx
		cpu += cpuTime() - cpu0
		pgCPU += dbtest.ServerCPU() - pg0
		wall += time.Since(wall0)
		x1, err := dbtest.WriteXacts(ctx, env.Pool)
		if err != nil {
			b.Fatal(err)
		}
		commits += x1 - x0
		if srv == nil {
			continue
		}
		served := srv.stats(b)
		mu.Lock()
		for _, inst := range insts {
			ref := run.Ref{WorkflowID: inst.WorkflowID, InstanceID: inst.InstanceID, RunID: inst.RunID}
			s, ok1 := starting[ref]
			r, ok2 := running[ref]
			d, ok3 := done[ref]
			held, ok4 := served[inst.InstanceID]
			c, ok5 := sent[inst.InstanceID]
			w, ok6 := recorded[ref]
			got, ok7 := received[inst.InstanceID]
			if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 {
				in, out := time.Unix(0, held[0]), time.Unix(0, held[1])
				overhead = append(overhead, d.Sub(s)-out.Sub(in))
				start = append(start, r.Sub(s))
				commit = append(commit, w.Sub(r))
				launch = append(launch, c.Sub(w))
				connect = append(connect, in.Sub(c))
				reply = append(reply, got.Sub(out))
				answer = append(answer, d.Sub(got))
			}
		}
		mu.Unlock()
	}
	steps := float64(b.N * runs)
	cpuMS := cpu.Seconds() / steps * 1000
	b.ReportMetric(cpuMS, "cpu-ms/step")
	b.ReportMetric(pgCPU.Seconds()/steps*1000, "pg-cpu-ms/step")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
	b.ReportMetric(float64(commits)/steps, "commits/step")
	b.ReportMetric(ms(floor), "commit-floor-ms")
	if writer.Awaited > 0 && writer.Transactions > 0 {
		// The engine's writer: the mean time of a write somebody waits for
		// (a recorded intent, a run's end) queued, then in its transaction;
		// the share of transactions opened beside another in flight.
		b.ReportMetric(ms(writer.AwaitedQueued)/float64(writer.Awaited), "awaited-queued-ms")
		b.ReportMetric(ms(writer.AwaitedInTx)/float64(writer.Awaited), "awaited-tx-ms")
		b.ReportMetric(float64(writer.Beside)/float64(writer.Transactions), "tx-beside")
		b.ReportMetric(float64(writer.Transactions)/steps, "writer-tx/step")
	}
	if srv != nil {
		if len(overhead) < b.N*runs {
			b.Fatalf("measured %d of %d steps", len(overhead), b.N*runs)
		}
		b.ReportMetric(ms(percentile(overhead, 0.5)), "p50-overhead-ms")
		b.ReportMetric(ms(percentile(overhead, 0.99)), "p99-overhead-ms")
		for _, part := range []struct {
			name string
			ds   []time.Duration
		}{{"start", start}, {"commit", commit}, {"launch", launch}, {"connect", connect}, {"reply", reply}, {"answer", answer}} {
			b.ReportMetric(ms(percentile(part.ds, 0.5)), "p50-"+part.name+"-ms")
			b.ReportMetric(ms(percentile(part.ds, 0.99)), "p99-"+part.name+"-ms")
		}
	}
	return cpuMS
}

// benchServerEnv makes this test binary the benchmark's server
// (TestMain): it answers GET /<id> after 100 ms, and GET /stats with when
// it received and answered each id (unix nanoseconds), until its stdin
// closes.
const benchServerEnv = "MAESTRO_HTTPBENCH_SERVER"

// benchServer is the server process.
type benchServer struct {
	url string
}

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) == "1" {
		serveBench()
		return
	}
	os.Exit(m.Run())
}

func serveBench() {
	var mu sync.Mutex
	held := map[int64][2]int64{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/stats" {
				mu.Lock()
				defer mu.Unlock()
				_ = json.NewEncoder(w).Encode(held)
				clear(held)
				return
			}
			in := time.Now()
			time.Sleep(100 * time.Millisecond)
			_, _ = w.Write([]byte(`{"ok": true}`))
			id, _ := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/"), 10, 64)
			mu.Lock()
			held[id] = [2]int64{in.UnixNano(), time.Now().UnixNano()}
			mu.Unlock()
		}))
	}()
	fmt.Printf("http://%s\n", ln.Addr())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the benchmark ends
}

func startBenchServer(b *testing.B) *benchServer {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start the server process: %v", err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("read the server's address: %v", err)
	}
	return &benchServer{url: strings.TrimSpace(line)}
}

// stats is when the server received and answered each id since the last
// call.
func (s *benchServer) stats(b *testing.B) map[int64][2]int64 {
	resp, err := http.Get(s.url + "/stats")
	if err != nil {
		b.Fatalf("read the server's figures: %v", err)
	}
	defer resp.Body.Close()
	var held map[int64][2]int64
	if err := json.NewDecoder(resp.Body).Decode(&held); err != nil {
		b.Fatalf("decode the server's figures: %v", err)
	}
	return held
}

// writeCommitFloor is the median time of n durable commits of a one-row
// insert, one round trip and one WAL flush each. (A transaction that only
// takes a transaction id, as dbtest.CommitFloor's, writes no WAL of its
// own before its commit record, which PostgreSQL then does not flush: it
// measures the round trip alone.)
func writeCommitFloor(ctx context.Context, db *pgxpool.Pool, n int) (time.Duration, error) {
	if _, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_commit_floor (x int)`); err != nil {
		return 0, err
	}
	ds := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := db.Exec(ctx, `INSERT INTO bench_commit_floor VALUES (1)`); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	return percentile(ds, 0.5), nil
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func cpuTime() time.Duration { return dbtest.ProcessCPU() }
