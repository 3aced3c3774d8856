package api_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch/batchtest"
	"github.com/maestro-aws/maestro/engine/stepruntime/httpstep"
	"github.com/maestro-aws/maestro/engine/stepruntime/notebook"
)

// The Maestro server samples (maestro-server/src/test/resources/samples in
// Netflix/maestro) are read from a clone of Maestro's repository, never
// copied into this one: MAESTRO_REFERENCE_REPO names the clone (a bare
// mirror is fine), else the session's mirror is used when present. Without
// one the sample tests are skipped.
const defaultReferenceRepo = "/work/.mirror/Netflix+maestro/repo"

// referenceRepo returns the git directory of Maestro's repository, or skips.
func referenceRepo(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MAESTRO_REFERENCE_REPO")
	if dir == "" {
		dir = defaultReferenceRepo
	}
	if err := exec.Command("git", "-C", dir, "rev-parse", "--verify", "HEAD").Run(); err != nil {
		t.Skipf("no clone of Netflix/maestro at %s (set MAESTRO_REFERENCE_REPO): %v", dir, err)
	}
	return dir
}

// referenceFile reads one file of Maestro's repository at HEAD.
func referenceFile(t *testing.T, repo, path string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repo, "show", "HEAD:"+path).Output()
	if err != nil {
		t.Fatalf("read %s from %s: %v", path, repo, err)
	}
	return string(out)
}

const samplesDir = "maestro-server/src/test/resources/samples/"

// sample is one of Maestro's server samples and what Maestro does with it.
type sample struct {
	file string
	// rejected: the push is refused (a step type this implementation has
	// no runtime for); the run fields are then unused.
	rejected bool
	// status is the status Maestro's run of the sample reaches.
	status string
	// signals are announced once the run started (its steps wait for them).
	signals []string
	// needs are samples pushed first (the subworkflows it calls).
	needs []string
	// failsWith is part of the message of the failed step's attempt, for
	// a sample that Maestro runs to FAILED.
	failsWith string
}

// maestroSamples lists every sample with the outcome of running it in
// Maestro (docs/maestro-compatibility.md explains each).
var maestroSamples = []sample{
	{file: "sample-conditional-wf.json", status: "SUCCEEDED"},
	{file: "sample-dag-test-1.json", status: "SUCCEEDED"},
	{file: "sample-dag-test-2.json", status: "SUCCEEDED"},
	{file: "sample-dag-test-3.json", status: "SUCCEEDED"},
	{file: "sample-dag-test-4.json", status: "SUCCEEDED"},
	{file: "sample-dag-test-5.json", status: "SUCCEEDED", signals: []string{
		`{"name":"prod_db/foo/bar","params":{"vtts_utc_dateint":"${DERIVED_RUN_DATE_UTC}"}}`,
		`{"name":"signal_b","params":{"key2":"value2"}}`}},
	{file: "sample-dag-test-6.json", status: "SUCCEEDED"},
	{file: "sample-dag-test-7.json", status: "SUCCEEDED"},
	{file: "sample-dag-test-8.json", status: "SUCCEEDED"},
	{file: "sample-dag-test-9.json", status: "SUCCEEDED"},
	{file: "sample-dag-test-10.json", status: "SUCCEEDED", signals: []string{
		`{"name":"signal_a","params":{"_step_dependency_sub_type":"input_signal","foo":"bar"}}`,
		`{"name":"signal_b","params":{"key2":"value2"}}`}},
	{file: "sample-foreach-wf.json", status: "SUCCEEDED"},
	{file: "sample-while-wf.json", status: "SUCCEEDED"},
	{file: "sample-large-foreach-wf.json", status: "SUCCEEDED"},
	{file: "sample-nested-foreach-wf.json", status: "SUCCEEDED"},
	{file: "sample-subworkflow-wf.json", status: "SUCCEEDED", needs: []string{"sample-dag-test-3.json"}},
	{file: "sample-nested-subworkflow-wf.json", status: "SUCCEEDED",
		needs: []string{"sample-dag-test-3.json", "sample-subworkflow-wf.json"}},
	{file: "sample-nested-foreach-subworkflow-wf.json", status: "SUCCEEDED", needs: []string{"sample-dag-test-3.json"}},
	{file: "sample-nested-subworkflow-foreach-wf.json", status: "SUCCEEDED", needs: []string{"sample-foreach-wf.json"}},
	{file: "sample-mixed-wf.json", status: "SUCCEEDED", needs: []string{"sample-dag-test-3.json",
		"sample-nested-foreach-subworkflow-wf.json", "sample-foreach-wf.json", "sample-nested-subworkflow-foreach-wf.json"}},
	{file: "sample-time-trigger-wf.json", status: "SUCCEEDED"},
	// Started by hand, as the README starts the other samples (its signal
	// trigger is left to the signal trigger work): job.1 waits for its two
	// signals, then its param params.getFromSignal('foo') fails, as in
	// Maestro for a run no signal started.
	{file: "sample-signal-trigger-wf.json", status: "FAILED", failsWith: "getFromSignal", signals: []string{
		`{"name":"db/test/table1","params":{"vtts_utc_dateint":"20500101","vtts_utc_hour":"00"}}`,
		`{"name":"db/test/table2","params":{"vtts_utc_dateint":"20500101","vtts_utc_hour":"00"}}`}},
	{file: "sample-kubernetes-wf.json", rejected: true},
	{file: "sample-kubernetes-env-wf.json", rejected: true},
	{file: "sample-kubernetes-nonretryable-wf.json", rejected: true},
	{file: "sample-kubernetes-output-wf.json", rejected: true},
	// The notebook samples run with a Batch carrier (batchtest's) whose
	// papermill writes an executed notebook (sampleNotebooks).
	{file: "sample-notebook-wf.json", status: "SUCCEEDED"},
	{file: "sample-notebook-git-wf.json", status: "SUCCEEDED"},
	{file: "yaml/sample-conditional-wf.yaml", status: "SUCCEEDED"},
	{file: "yaml/sample-http-wf.yaml", status: "SUCCEEDED"},
}

// sleepScale is how much faster than real time Sleep steps run in the
// sample test: the samples sleep up to 100 s a step and minutes in all.
// MAESTRO_COMPAT_REAL_SLEEP=1 runs them at their real length.
func sleepScale() float64 {
	if os.Getenv("MAESTRO_COMPAT_REAL_SLEEP") == "1" {
		return 1
	}
	return 50
}

// scaledSleep is the Sleep runtime with sleep_seconds divided by scale:
// the order and overlap of the steps are those of the real sleeps.
type scaledSleep struct {
	stepruntime.Sleep
	scale float64
}

func (s scaledSleep) scaled(a *stepruntime.Attempt) *stepruntime.Attempt {
	c := *a
	c.Params = make(map[string]any, len(a.Params))
	for k, v := range a.Params {
		c.Params[k] = v
	}
	switch v := a.Params["sleep_seconds"].(type) {
	case int64:
		c.Params["sleep_seconds"] = float64(v) / s.scale
	case float64:
		c.Params["sleep_seconds"] = v / s.scale
	case nil:
		if _, set := a.Config["sleep_seconds"]; !set {
			c.Params["sleep_seconds"] = 3.0 / s.scale
		}
	}
	return &c
}

func (s scaledSleep) Start(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	return s.Sleep.Start(ctx, s.scaled(a))
}

func (s scaledSleep) Execute(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	return s.Sleep.Execute(ctx, s.scaled(a))
}

// withSampleEngine starts an engine whose Http steps reach this API at
// localhost:8080 (where the Http sample calls Maestro) and whose Sleep
// steps run sleepScale times faster.
func (e *testEnv) withSampleEngine() {
	e.t.Helper()
	api := httptest.NewServer(e.h)
	e.t.Cleanup(api.Close)
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == "localhost:8080" {
			addr = api.Listener.Addr().String()
		}
		return dialer.DialContext(ctx, network, addr)
	}}}
	runtimes := stepruntime.Builtins()
	runtimes["Sleep"] = scaledSleep{Sleep: stepruntime.Sleep{Now: time.Now}, scale: sleepScale()}
	runtimes[httpstep.Type] = httpstep.New(httpstep.Config{Client: client})
	runtimes[notebook.Type] = sampleNotebookRuntime(e.t)
	eng, err := flow.New(e.pool, flow.Config{Logger: discardLogger(), Lease: 2 * time.Second, Runtimes: runtimes})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(eng.Stop)
}

// sampleNotebooks stands for the output bucket of a notebook carrier: each
// notebook a job wrote there reads back as an executed notebook that
// printed Maestro's output (as the samples' script does).
type sampleNotebooks struct{}

func (sampleNotebooks) Read(_ context.Context, bucket, key string, _ int64) ([]byte, error) {
	if bucket != "sample-notebooks" || !strings.HasPrefix(key, "out/maestro-output_") {
		return nil, fmt.Errorf("no object s3://%s/%s", bucket, key)
	}
	return []byte(`{"cells":[{"cell_type":"code","outputs":[{"output_type":"stream","name":"stdout",` +
		`"text":"hello world\nMAESTRO_OUTPUT_START{\"params\":{\"foo\":{\"value\":\"bar\",\"type\":\"STRING\"}}}MAESTRO_OUTPUT_END\n"}]}]}`), nil
}

// sampleNotebookRuntime is the Notebook runtime as an engine configured
// with a Batch carrier has it, over an in-memory Batch.
func sampleNotebookRuntime(t testing.TB) stepruntime.Runtime {
	t.Helper()
	j, err := batch.NewJob(batch.Config{Client: batchtest.New(), JobQueue: "notebooks", PollInterval: 100 * time.Millisecond, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := notebook.New(notebook.Config{Carrier: notebook.CarrierBatch, Job: j, JobDefinition: "papermill",
		OutputPrefix: "s3://sample-notebooks/out/", Objects: sampleNotebooks{}, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// pushSample pushes a sample as Maestro's README does (the caller "tester").
func (e *testEnv) pushSample(repo, file string) response {
	e.t.Helper()
	body := referenceFile(e.t.(*testing.T), repo, samplesDir+file)
	path := "/api/v3/workflows"
	if strings.HasSuffix(file, ".yaml") {
		path += "/yaml"
	}
	return e.send(http.MethodPost, path, "tester", body)
}

// sampleWorkflowID is the workflow id a sample pushes.
func sampleWorkflowID(file string) string {
	name := file[strings.LastIndex(file, "/")+1:]
	return strings.TrimSuffix(strings.TrimSuffix(name, ".json"), ".yaml")
}

// TestMaestroServerSamples pushes every Maestro server sample unchanged and
// runs each to the status Maestro's run reaches, announcing the signals
// the samples wait for as Maestro's READMEs do.
func TestMaestroServerSamples(t *testing.T) {
	repo := referenceRepo(t)
	listed := map[string]bool{}
	for _, s := range maestroSamples {
		listed[s.file] = true
	}
	out, err := exec.Command("git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD", samplesDir).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(out)) {
		if !listed[strings.TrimPrefix(f, samplesDir)] {
			t.Errorf("Maestro sample %s is not in maestroSamples", f)
		}
	}
	t.Parallel()
	var mu sync.Mutex
	var accepted, succeeded, runnable int
	for _, s := range maestroSamples {
		t.Run(s.file, func(t *testing.T) {
			t.Parallel()
			e := newTestServer(t)
			e.withSampleEngine()
			for _, dep := range s.needs {
				e.pushSample(repo, dep).expect(t, http.StatusOK)
			}
			r := e.pushSample(repo, s.file)
			if s.rejected {
				if r.code != http.StatusBadRequest {
					t.Fatalf("push answered %d, want 400 (no runtime for its step type): %s", r.code, r.raw)
				}
				return
			}
			mu.Lock()
			runnable++
			mu.Unlock()
			if r.code != http.StatusOK {
				t.Fatalf("push answered %d: %s", r.code, r.raw)
			}
			mu.Lock()
			accepted++
			mu.Unlock()
			id := sampleWorkflowID(s.file)
			e.send(http.MethodPost, "/api/v3/workflows/"+id+"/versions/latest/actions/start", "tester",
				`{"initiator": {"type": "manual"}}`).expect(t, http.StatusOK)
			path := "/api/v3/workflows/" + id + "/instances/1"
			if len(s.signals) > 0 {
				e.announceSampleSignals(path, s.signals)
			}
			got := e.waitTerminalWithin(path, 3*time.Minute)
			if got.body["status"] != s.status {
				t.Fatalf("run ended %v, want %s: %s", got.body["status"], s.status, got.raw)
			}
			if s.failsWith != "" {
				steps := e.send(http.MethodGet, path+"/runs/1/steps", "", "").expect(t, http.StatusOK)
				if !strings.Contains(string(steps.raw), s.failsWith) {
					t.Fatalf("no step failed with %q: %s", s.failsWith, steps.raw)
				}
			}
			mu.Lock()
			succeeded++
			mu.Unlock()
		})
	}
	t.Cleanup(func() {
		t.Logf("Maestro samples: %d of %d with known step types accepted, %d run to Maestro's status", accepted, runnable, succeeded)
	})
}

// announceSampleSignals waits until the run's first step waits for its
// signals, then announces them. ${NAME} in a signal is the run's param.
func (e *testEnv) announceSampleSignals(path string, signals []string) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r := e.send(http.MethodGet, path, "", "").expect(e.t, http.StatusOK)
		st, _ := r.body["status"].(string)
		if st != "CREATED" && st != "IN_PROGRESS" || waitingForSignals(e, path) {
			// Read the run again: the read above may predate its start,
			// when its params were not evaluated yet.
			r = e.send(http.MethodGet, path, "", "").expect(e.t, http.StatusOK)
			params, _ := r.body["params"].(map[string]any)
			for _, s := range signals {
				for name, p := range params {
					v, _ := p.(map[string]any)["evaluated_result"]
					if v == nil {
						v = p.(map[string]any)["value"]
					}
					s = strings.ReplaceAll(s, "${"+name+"}", fmt.Sprint(v))
				}
				if strings.Contains(s, "${") {
					e.t.Fatalf("%s: signal %s names a param the run does not have", path, s)
				}
				e.send(http.MethodPost, "/api/v3/signals", "tester", s).expect(e.t, http.StatusOK)
			}
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s never waited for signals", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitingForSignals reports whether a step of the run waits for signals.
func waitingForSignals(e *testEnv, path string) bool {
	r := e.send(http.MethodGet, path+"/runs/1/steps", "", "")
	return strings.Contains(string(r.raw), `"WAITING_FOR_SIGNALS"`)
}

// waitTerminalWithin polls an instance until its status is terminal.
func (e *testEnv) waitTerminalWithin(path string, limit time.Duration) response {
	e.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		r := e.send(http.MethodGet, path, "", "").expect(e.t, http.StatusOK)
		switch r.body["status"] {
		case "SUCCEEDED", "FAILED", "STOPPED", "TIMED_OUT":
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s still %v after %s", path, r.body["status"], limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
