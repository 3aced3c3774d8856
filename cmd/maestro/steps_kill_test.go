package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime/ecstask/ecstasktest"
	"github.com/maestro-aws/maestro/engine/stepruntime/httpstep"
)

// keyCounter is an HTTP server that counts each Idempotency-Key it gets
// and answers after a while, so that calls are in flight when the engine
// is killed.
type keyCounter struct {
	mu       sync.Mutex
	keys     map[string]int
	received atomic.Int64
}

func (k *keyCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	k.mu.Lock()
	k.keys[r.Header.Get(httpstep.IdempotencyHeader)]++
	k.mu.Unlock()
	k.received.Add(1)
	select {
	case <-time.After(time.Second):
		_, _ = io.WriteString(w, `{"ok": true}`)
	case <-r.Context().Done():
	}
}

func (k *keyCounter) counts() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.keys)
}

// Kill -9 the engine while 200 side effects run (100 runs, each with an
// Http step and an EcsTask step), then start it again. Each ECS task is
// launched once: the restarted engine finds the running ones by startedBy.
// Each Http request is sent at most once per attempt: a call whose answer
// the kill lost is not sent again under the same idempotency key; its
// attempt fails as a platform error and the retry (a new attempt, a new
// key) succeeds. Every run ends SUCCEEDED.
//
// ECS is ecstasktest's fake served over ECS's JSON protocol to the engine
// process's real SDK client (MAESTRO_AWS_ENDPOINT): ministack's ECS keeps
// its tasks RUNNING for ever without Docker, so they could not end.
func TestKilledEngineRunsEachSideEffectOnce(t *testing.T) {
	t.Parallel()
	const runs = 100
	dsn := dbtest.URL(t)
	ctx := context.Background()

	counter := &keyCounter{keys: map[string]int{}}
	httpSrv := httptest.NewServer(counter)
	t.Cleanup(httpSrv.Close)
	fake := ecstasktest.New()
	fake.Define("etl", "main")
	ecsSrv := httptest.NewServer(fake.Handler())
	t.Cleanup(ecsSrv.Close)

	f := pushAndStart(t, dsn, runs, fmt.Sprintf(`{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"effects","steps":[
	  {"step":{"id":"call","type":"Http","retry_policy":{"backoff":{"type":"FIXED_BACKOFF","platform_retry_backoff_in_secs":1}},
	    "params":{"http":{"type":"MAP","value":{"url":{"type":"STRING","value":"%s/jobs/${workflow_instance_id}"},
	      "method":{"type":"STRING","value":"POST"},"body":{"type":"STRING","value":"{}"}}}}}},
	  {"step":{"id":"job","type":"EcsTask","params":{"ecs_task":{"type":"MAP","value":{
	    "task_definition":{"type":"STRING","value":"etl"},"poll_interval":{"type":"STRING","value":"300ms"},
	    "env":{"type":"STRING_MAP","value":{"RUN_FOR":"3s"}}}}}}}]}}`, httpSrv.URL))

	env := []string{"MAESTRO_AWS_ENDPOINT=" + ecsSrv.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true", "MAESTRO_ECS_CLUSTER=jobs",
		"MAESTRO_ECS_SUBNETS=subnet-1", "MAESTRO_WORKERS=512"}
	p1 := engineProcess(t, dsn, "fx-1", "4", env...)
	deadline := time.Now().Add(60 * time.Second)
	for counter.received.Load() < runs/2 || len(fake.AllLaunches()) < runs/2 {
		if time.Now().After(deadline) {
			t.Fatalf("before the kill: %d requests, %d tasks", counter.received.Load(), len(fake.AllLaunches()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	t.Logf("killed with %d requests received and %d tasks launched", counter.received.Load(), len(fake.AllLaunches()))
	engineProcess(t, dsn, "fx-2", "4", env...)
	f.checkAllSucceeded(t, 120*time.Second)

	// Every attempt of every step, with its status.
	rows, err := f.pool.Query(ctx, `SELECT step_id, uuid::text, status FROM step_instance WHERE workflow_id = 'effects'`)
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct{ Step, UUID, Status string }
	atts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[attempt])
	if err != nil {
		t.Fatal(err)
	}
	keys, launches := counter.counts(), fake.AllLaunches()
	var jobs, calls, retried int
	for _, a := range atts {
		switch a.Step {
		case "job":
			jobs++
			if launches[a.UUID] != 1 || a.Status != string(instance.StepSucceeded) {
				t.Errorf("EcsTask attempt %s: %s, launched %d times", a.UUID, a.Status, launches[a.UUID])
			}
		case "call":
			calls++
			if keys[a.UUID] > 1 {
				t.Errorf("Http attempt %s (%s) sent %d times", a.UUID, a.Status, keys[a.UUID])
			}
			switch a.Status {
			case string(instance.StepSucceeded):
				if keys[a.UUID] != 1 {
					t.Errorf("Http attempt %s succeeded, sent %d times", a.UUID, keys[a.UUID])
				}
			case string(instance.StepPlatformFailed):
				retried++
			default:
				t.Errorf("Http attempt %s ended %s", a.UUID, a.Status)
			}
		}
	}
	if jobs != runs || len(launches) != runs {
		t.Errorf("%d EcsTask attempts and %d tasks for %d runs", jobs, len(launches), runs)
	}
	for key, n := range keys {
		if n > 1 {
			t.Errorf("idempotency key %s sent %d times", key, n)
		}
	}
	if calls != runs+retried || len(keys) > calls {
		t.Errorf("%d Http attempts (%d retried after the kill), %d keys seen", calls, retried, len(keys))
	}
	t.Logf("%d Http calls in flight at the kill were retried as new attempts", retried)
}
