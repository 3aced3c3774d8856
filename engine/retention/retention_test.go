package retention_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/retention"
)

// env is a test database with an engine, a directory archive and an
// archiver whose clock is later than the real one by Ahead.
type env struct {
	*flowtest.Env
	dir *archive.Dir
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ft := flowtest.New(t)
	ft.Engine(nil, flow.Config{})
	dir, err := archive.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &env{Env: ft, dir: dir}
}

// archiver archives what ended more than an hour before now+ahead.
func (e *env) archiver(ahead time.Duration, batch int) *retention.Archiver {
	e.T.Helper()
	a, err := retention.New(e.Pool, e.dir, retention.Config{Retention: time.Hour, BatchSize: batch, Pause: -1,
		Logger: flowtest.Logger(), Now: func() time.Time { return time.Now().Add(ahead) }})
	if err != nil {
		e.T.Fatal(err)
	}
	return a
}

func (e *env) run(a *retention.Archiver) retention.Result {
	e.T.Helper()
	res, err := a.Run(context.Background())
	if err != nil {
		e.T.Fatalf("archive: %v", err)
	}
	return res
}

// runOf starts a run and waits for it to end.
func (e *env) runOf(wf string) *execution.Instance {
	e.T.Helper()
	return e.Wait(e.Start(wf), time.Minute)
}

func (e *env) count(sql string, args ...any) int64 {
	e.T.Helper()
	var n int64
	if err := e.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.T.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (e *env) runExists(wf string, iid, run int64) bool {
	return e.count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`, wf, iid, run) == 1
}

func (e *env) stepsOf(wf string, iid, run int64) int64 {
	return e.count(`SELECT count(*) FROM step_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`, wf, iid, run)
}

const twoSteps = `{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"%s","steps":[
  {"step":{"id":"a","type":"NoOp"}},{"step":{"id":"b","type":"NoOp"}}]}}`

func push(e *env, id string) { e.Push(strings.Replace(twoSteps, "%s", id, 1)) }

// TestArchiveThenRestart: of an active workflow only runs that are not the
// latest of their instance are archived, with their steps, into the
// object named by run_archive; the archived run reads back; the instance
// still restarts (its latest run stayed) and, once the workflow is
// deactivated, every ended run goes.
func TestArchiveThenRestart(t *testing.T) {
	e := newEnv(t)
	push(e, "wf")
	first := e.runOf("wf")
	second := e.runOf("wf")
	ctx := context.Background()
	restarted, err := e.Runs.Restart(ctx, execution.RestartRequest{WorkflowID: "wf", InstanceID: first.InstanceID,
		Policy: execution.RestartFromBeginning})
	if err != nil {
		t.Fatal(err)
	}
	restarted = e.Wait(restarted, time.Minute)
	if restarted.RunID != 2 {
		t.Fatalf("restart made run %d, want 2", restarted.RunID)
	}

	// Nothing is old enough yet.
	if res := e.run(e.archiver(0, 10)); res.Runs != 0 {
		t.Fatalf("archived %d runs that ended just now", res.Runs)
	}
	res := e.run(e.archiver(2*time.Hour, 10))
	if res.Runs != 1 || res.Steps != 2 || res.Objects != 1 || res.Skipped != 0 {
		t.Fatalf("pass = %+v, want the one earlier run of instance %d with its 2 steps", res, first.InstanceID)
	}
	if e.runExists("wf", first.InstanceID, 1) || e.stepsOf("wf", first.InstanceID, 1) != 0 {
		t.Fatal("the archived run or its steps are still in the database")
	}
	for _, k := range [][2]int64{{first.InstanceID, 2}, {second.InstanceID, 1}} {
		if !e.runExists("wf", k[0], k[1]) || e.stepsOf("wf", k[0], k[1]) != 2 {
			t.Fatalf("run %d/%d, the latest of its instance, was archived", k[0], k[1])
		}
	}

	// The archive: one object under the workflow's and the end date's
	// partition, holding the run with its steps and timelines.
	rd := retention.NewReader(e.Pool, e.dir)
	got, err := rd.Lookup(ctx, "wf", first.InstanceID, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantPrefix := "runs/workflow_id=wf/date=" + first.EndTime.UTC().Format(time.DateOnly) + "/"
	if !strings.HasPrefix(got.Key, wantPrefix) || !strings.HasSuffix(got.Key, ".jsonl.gz") {
		t.Fatalf("object %s, want under %s", got.Key, wantPrefix)
	}
	if _, err := os.Stat(filepath.Join(e.dir.Root(), filepath.FromSlash(got.Key))); err != nil {
		t.Fatal(err)
	}
	if len(got.Record.Steps) != 2 {
		t.Fatalf("archived %d steps, want 2", len(got.Record.Steps))
	}
	inst, err := got.Record.Instance()
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != instance.WorkflowSucceeded || inst.UUID != first.UUID || inst.RuntimeOverview.TotalStepCount != 2 ||
		inst.RuntimeOverview.StepOverview[instance.StepSucceeded] != 2 {
		t.Fatalf("archived run reads back as %+v / %+v", inst, inst.RuntimeOverview)
	}
	var timeline []json.RawMessage
	if err := json.Unmarshal(inst.Timeline, &timeline); err != nil || len(timeline) == 0 {
		t.Fatalf("archived run has no timeline: %s (%v)", inst.Timeline, err)
	}
	// The latest run of an instance, without a run number, is the archived
	// latest one: run 1 here.
	if l, err := rd.Lookup(ctx, "wf", first.InstanceID, 0); err != nil || l.Record.RunID != 1 {
		t.Fatalf("latest archived run: %v, %v", l, err)
	}
	if _, err := rd.Lookup(ctx, "wf", second.InstanceID, 1); !errors.Is(err, retention.ErrNotArchived) {
		t.Fatalf("lookup of a run in the database: %v, want ErrNotArchived", err)
	}

	// Restart after the archive: the instance's latest run is there.
	third, err := e.Runs.Restart(ctx, execution.RestartRequest{WorkflowID: "wf", InstanceID: first.InstanceID,
		Policy: execution.RestartFromBeginning})
	if err != nil {
		t.Fatalf("restart after archiving: %v", err)
	}
	if third = e.Wait(third, time.Minute); third.RunID != 3 || third.Status != instance.WorkflowSucceeded {
		t.Fatalf("restart after archiving: run %d %s", third.RunID, third.Status)
	}

	// Deactivated, the workflow's latest runs may go too.
	if _, err := e.Defs.Deactivate(ctx, "wf", definition.Actor{Name: "tester"}); err != nil {
		t.Fatal(err)
	}
	res = e.run(e.archiver(2*time.Hour, 10))
	if res.Runs != 3 || res.More {
		t.Fatalf("after deactivation: %+v, want the 3 remaining runs", res)
	}
	if n := e.count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'wf'`); n != 0 {
		t.Fatalf("%d runs left", n)
	}
	if n := e.count(`SELECT count(*) FROM run_archive WHERE workflow_id = 'wf'`); n != 4 {
		t.Fatalf("run_archive holds %d runs, want 4", n)
	}
}

// TestWorkflowRetention: run_retention_days in a workflow's properties
// overrides the deployment's retention, both ways.
func TestWorkflowRetention(t *testing.T) {
	e := newEnv(t)
	e.Push(`{"properties":{"owner":"tester","run_strategy":"PARALLEL","run_retention_days":30},
	  "workflow":{"id":"long","steps":[{"step":{"id":"a","type":"NoOp"}}]}}`)
	e.Push(`{"properties":{"owner":"tester","run_strategy":"PARALLEL","run_retention_days":1},
	  "workflow":{"id":"short","steps":[{"step":{"id":"a","type":"NoOp"}}]}}`)
	ctx := context.Background()
	for _, wf := range []string{"long", "short"} {
		e.runOf(wf)
		again, err := e.Runs.Restart(ctx, execution.RestartRequest{WorkflowID: wf, InstanceID: 1, Policy: execution.RestartFromBeginning})
		if err != nil {
			t.Fatal(err)
		}
		e.Wait(again, time.Minute)
	}
	a, err := retention.New(e.Pool, e.dir, retention.Config{Retention: 90 * 24 * time.Hour, Pause: -1,
		Logger: flowtest.Logger(), Now: func() time.Time { return time.Now().Add(48 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if res := e.run(a); res.Runs != 1 {
		t.Fatalf("pass = %+v, want the first run of 'short' only", res)
	}
	if !e.runExists("long", 1, 1) || e.runExists("short", 1, 1) || !e.runExists("short", 1, 2) {
		t.Fatal("the wrong runs were archived")
	}
}

// TestBatchesSkipLockedRuns: a pass works in batches of BatchSize; a run
// someone holds is skipped (its archive copy is harmless: run_archive does
// not name it), and the next pass takes it.
func TestBatchesSkipLockedRuns(t *testing.T) {
	e := newEnv(t)
	push(e, "many")
	for range 7 {
		e.runOf("many")
	}
	ctx := context.Background()
	if _, err := e.Defs.Deactivate(ctx, "many", definition.Actor{Name: "tester"}); err != nil {
		t.Fatal(err)
	}
	tx, err := e.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM workflow_instance WHERE workflow_id = 'many' AND instance_id = 4 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	a := e.archiver(2*time.Hour, 3)
	done := make(chan retention.Result, 1)
	go func() {
		res, err := a.Run(ctx)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	var res retention.Result
	select {
	case res = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the archiver waited for a locked run")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// 7 runs in batches of 3: the locked run comes back as a candidate
	// after each batch until the pass has seen MaxRuns or a short batch.
	if res.Runs != 6 || res.Skipped < 1 || res.Batches < 3 || res.Steps != 12 {
		t.Fatalf("pass = %+v, want 6 runs in at least 3 batches and the locked one skipped", res)
	}
	if !e.runExists("many", 4, 1) || e.count(`SELECT count(*) FROM run_archive WHERE workflow_id = 'many' AND instance_id = 4`) != 0 {
		t.Fatal("the locked run was deleted or located")
	}
	if res := e.run(a); res.Runs != 1 {
		t.Fatalf("second pass = %+v, want the run that was locked", res)
	}
	if e.count(`SELECT count(*) FROM run_archive WHERE workflow_id = 'many'`) != 7 {
		t.Fatal("not every run is located in the archive")
	}
}

// TestArchiveWhileTheEngineRuns: passes run back to back while the engine
// starts and finishes runs of the same workflows; runs in flight are never
// touched (every one of them ends with all its steps) and every ended run
// that is not the latest of its instance is archived.
func TestArchiveWhileTheEngineRuns(t *testing.T) {
	e := newEnv(t)
	push(e, "done")
	e.Push(`{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"busy","steps":[
	  {"step":{"id":"nap","type":"Sleep","sleep_seconds":0.2}},{"step":{"id":"after","type":"NoOp"}}]}}`)
	for range 20 {
		e.runOf("done")
	}
	ctx := context.Background()
	if _, err := e.Defs.Deactivate(ctx, "done", definition.Actor{Name: "tester"}); err != nil {
		t.Fatal(err)
	}
	// Runs of "busy" in flight while the archiver works: four at a time,
	// each loop starting the next once its run ended.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var started []*execution.Instance
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := e.Runs.Start(ctx, execution.StartRequest{WorkflowID: "busy", Version: "latest"})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				started = append(started, res.Instance)
				mu.Unlock()
				for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
					got, err := e.Runs.Instance(ctx, "busy", res.Instance.InstanceID, res.Instance.RunID)
					if err != nil {
						t.Error(err)
						return
					}
					if got.Status.IsTerminal() {
						break
					}
				}
			}
		}()
	}
	a := e.archiver(2*time.Hour, 5)
	var total retention.Result
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res := e.run(a)
		total.Runs += res.Runs
		if e.count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'done'`) == 0 && len(snapshot(&mu, &started)) > 40 {
			break
		}
	}
	close(stop)
	wg.Wait()
	if total.Runs != 20 {
		t.Fatalf("archived %d runs, want the 20 of the deactivated workflow", total.Runs)
	}
	for _, inst := range snapshot(&mu, &started) {
		got := e.Wait(inst, 2*time.Minute)
		if got.Status != instance.WorkflowSucceeded || e.stepsOf("busy", inst.InstanceID, inst.RunID) != 2 {
			t.Fatalf("run busy/%d in flight ended %s with %d steps", inst.InstanceID, got.Status,
				e.stepsOf("busy", inst.InstanceID, inst.RunID))
		}
	}
	if n := e.count(`SELECT count(*) FROM run_archive WHERE workflow_id = 'busy'`); n != 0 {
		t.Fatalf("%d runs of the active workflow, each the latest of its instance, were archived", n)
	}
}

func snapshot(mu *sync.Mutex, s *[]*execution.Instance) []*execution.Instance {
	mu.Lock()
	defer mu.Unlock()
	return append([]*execution.Instance(nil), *s...)
}

// TestConfig refuses a retention shorter than MinRetention.
func TestConfig(t *testing.T) {
	e := flowtest.New(t)
	dir, _ := archive.NewDir(t.TempDir())
	if _, err := retention.New(e.Pool, dir, retention.Config{Retention: time.Minute, Logger: flowtest.Logger()}); err == nil {
		t.Fatal("a one-minute retention was accepted")
	}
}

// TestDeadlineStopsThePass: a pass whose context ends within the margin
// starts no batch and says more is left (the next invocation takes it).
func TestDeadlineStopsThePass(t *testing.T) {
	e := newEnv(t)
	push(e, "late")
	e.runOf("late")
	if _, err := e.Defs.Deactivate(context.Background(), "late", definition.Actor{Name: "tester"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := e.archiver(2*time.Hour, 10).Run(ctx)
	if err != nil || res.Runs != 0 || !res.More || res.Lag <= 0 {
		t.Fatalf("pass near its deadline: %+v, %v", res, err)
	}
	if res := e.run(e.archiver(2*time.Hour, 10)); res.Runs != 1 || res.More {
		t.Fatalf("next pass: %+v", res)
	}
}
