package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/trigger"
	"github.com/maestro-aws/maestro/engine/trigger/schedule"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

type world struct {
	pool  *pgxpool.Pool
	defs  *definition.Store
	runs  *execution.Service
	clock *clock
}

func newWorld(t *testing.T) *world {
	t.Helper()
	pool := dbtestPool(t)
	defs := definition.NewStore(pool)
	return &world{pool: pool, defs: defs, runs: execution.New(pool, defs, 4), clock: &clock{t: time.Now()}}
}

func (w *world) scheduler(t testing.TB, cfg Config) *Scheduler {
	t.Helper()
	cfg.Clock = w.clock.Now
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := New(w.pool, w.runs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// push stores a workflow with the given time triggers (JSON) and builds its
// trigger rows as of the test clock's now.
func (w *world) push(t *testing.T, id, triggers string, extra ...string) {
	t.Helper()
	more := ""
	if len(extra) > 0 {
		more = extra[0]
	}
	pushDoc(t, w.defs, fmt.Sprintf(`{"properties":{"owner":"o","run_strategy":"PARALLEL"},
		"workflow":{"id":%q,"time_triggers":%s%s,"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`, id, triggers, more))
	w.resync(t, id)
}

// pushDoc validates and stores a definition.
func pushDoc(t testing.TB, defs *definition.Store, doc string) {
	t.Helper()
	d, err := workflow.DecodeJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := (workflow.Validator{}).Validate(d); err != nil {
		t.Fatal(err)
	}
	if _, err := defs.Create(context.Background(), d, "o"); err != nil {
		t.Fatal(err)
	}
}

func dbtestPool(t testing.TB) *pgxpool.Pool { return dbtest.Pool(t) }

// resync rebuilds a workflow's trigger rows as of the test clock's now.
func (w *world) resync(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM time_trigger WHERE workflow_id = $1`, id); err != nil {
			return err
		}
		return trigger.Sync(ctx, tx, id, w.clock.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (w *world) triggers(t *testing.T, id string) []trigger.Listed {
	t.Helper()
	ts, err := trigger.List(context.Background(), w.pool, id)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// run is a run a trigger started.
type run struct {
	instanceID int64
	requestID  string
	initiator  map[string]any
	runTS      int64
}

func (w *world) runsOf(t *testing.T, id string) []run {
	t.Helper()
	rows, err := w.pool.Query(context.Background(), `SELECT instance_id, coalesce(request_id, ''), initiator,
            coalesce((run_params->'RUN_TS'->>'value')::bigint, 0)
        FROM workflow_instance WHERE workflow_id = $1 ORDER BY instance_id`, id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (run, error) {
		var x run
		var init []byte
		err := r.Scan(&x.instanceID, &x.requestID, &init, &x.runTS)
		_ = json.Unmarshal(init, &x.initiator)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustFire(t *testing.T, s *Scheduler) Stats {
	t.Helper()
	st, err := s.FireDue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func utc(y int, m time.Month, d, h, min, s int) time.Time {
	return time.Date(y, m, d, h, min, s, 0, time.UTC)
}

// A due trigger starts one run for its fire time, with Maestro's TIME
// initiator, RUN_TS and request id, and moves to its next fire time; a
// second pass at the same time starts nothing.
func TestFireStartsOneRunPerFireTime(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.clock.Set(utc(2024, 5, 1, 9, 59, 30))
	w.push(t, "every-minute", `[{"type":"CRON","cron":"* * * * *","timezone":"UTC"}]`)
	s := w.scheduler(t, Config{})
	if st := mustFire(t, s); st.Claimed != 0 {
		t.Fatalf("fired before the first fire time: %+v", st)
	}
	w.clock.Set(utc(2024, 5, 1, 10, 0, 2))
	if st := mustFire(t, s); st.Claimed != 1 || st.Started != 1 {
		t.Fatalf("stats %+v, want one trigger claimed and one run started", st)
	}
	runs := w.runsOf(t, "every-minute")
	tr := w.triggers(t, "every-minute")[0]
	fire := utc(2024, 5, 1, 10, 0, 0)
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	r := runs[0]
	if r.runTS != fire.UnixMilli() || r.requestID != schedule.RequestID("every-minute", tr.Key, fire) ||
		r.initiator["type"] != "TIME" || r.initiator["trigger_uuid"] != tr.UUID || r.initiator["timezone"] != "UTC" ||
		r.initiator["trigger_time"] != float64(fire.UnixMilli()) || r.initiator["depth"] != float64(0) {
		t.Errorf("run %+v", r)
	}
	if !tr.NextFire.Equal(utc(2024, 5, 1, 10, 1, 0)) || !tr.LastFire.Equal(fire) || *tr.LastInstanceID != r.instanceID ||
		tr.LastRunStatus == nil || *tr.LastRunStatus != "CREATED" {
		t.Errorf("trigger after firing: %+v status %v", tr.Trigger, tr.LastRunStatus)
	}
	if st := mustFire(t, s); st.Claimed != 0 {
		t.Fatalf("fired twice at the same time: %+v", st)
	}
}

// Two schedulers race over 1,000 due triggers: each fire time starts
// exactly one run. Firing the same fire times again (as a scheduler would
// if its advance were lost) finds every run already there.
func TestTwoSchedulersRacingStartEachFireTimeOnce(t *testing.T) {
	t.Parallel()
	const n = 1000
	ctx := context.Background()
	w := newWorld(t)
	w.clock.Set(utc(2024, 5, 1, 23, 59, 0))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 4 {
				d, _ := workflow.DecodeJSON([]byte(fmt.Sprintf(`{"workflow":{"id":"wf%04d","time_triggers":[{"cron":"0 0 * * *"}],
					"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`, i)))
				if _, err := w.defs.Create(ctx, d, "o"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	midnight := utc(2024, 5, 2, 0, 0, 0)
	if _, err := w.pool.Exec(ctx, `UPDATE time_trigger SET next_schedule_at = $1, next_fire_at = $1`, midnight); err != nil {
		t.Fatal(err)
	}
	w.clock.Set(midnight.Add(3 * time.Second))
	race := func() [2]Stats {
		var out [2]Stats
		var wg sync.WaitGroup
		for i := range 2 {
			s := w.scheduler(t, Config{BatchSize: 25})
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := s.FireDue(ctx)
				if err != nil {
					t.Error(err)
				}
				out[i] = st
			}()
		}
		wg.Wait()
		return out
	}
	st := race()
	var runs, distinct, advanced int
	if err := w.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT request_id) FROM workflow_instance`).Scan(&runs, &distinct); err != nil {
		t.Fatal(err)
	}
	if err := w.pool.QueryRow(ctx, `SELECT count(*) FROM time_trigger WHERE next_fire_at = $1 AND last_fire_at = $2`,
		midnight.Add(24*time.Hour), midnight).Scan(&advanced); err != nil {
		t.Fatal(err)
	}
	if runs != n || distinct != n || advanced != n || st[0].Claimed+st[1].Claimed != n || st[0].Started+st[1].Started != n {
		t.Fatalf("%d runs (%d request ids), %d triggers advanced once; schedulers claimed %d and %d", runs, distinct, advanced,
			st[0].Claimed, st[1].Claimed)
	}
	if st[0].Claimed == 0 || st[1].Claimed == 0 {
		t.Logf("one scheduler claimed everything (%d/%d): the race did not interleave this time", st[0].Claimed, st[1].Claimed)
	}
	if _, err := w.pool.Exec(ctx, `UPDATE time_trigger SET next_schedule_at = $1, next_fire_at = $1`, midnight); err != nil {
		t.Fatal(err)
	}
	st = race()
	if err := w.pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instance`).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	if runs != n || st[0].Duplicated+st[1].Duplicated != n || st[0].Started+st[1].Started != 0 {
		t.Fatalf("firing the same fire times again: %d runs, stats %+v", runs, st)
	}
}

// The missed-fire policy: fire times late by less than the catch-up window
// all fire; of older ones only the latest, once, and only when none is
// within the window.
func TestMissedFireTimes(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.clock.Set(utc(2024, 5, 1, 0, 0, 30))
	w.push(t, "hourly", `[{"cron":"0 * * * *"}]`)
	w.push(t, "minutely", `[{"cron":"* * * * *"}]`)
	w.push(t, "short-outage", `[{"cron":"* * * * *"}]`)
	s := w.scheduler(t, Config{CatchUp: 5 * time.Minute})
	ctx := context.Background()
	// The scheduler was down: hourly since 01:00 (five fire times passed by
	// 05:30), minutely since 05:10 (twenty), short-outage since 05:27.
	set := func(id string, at time.Time) {
		if _, err := w.pool.Exec(ctx, `UPDATE time_trigger SET next_schedule_at = $2, next_fire_at = $2 WHERE workflow_id = $1`, id, at); err != nil {
			t.Fatal(err)
		}
	}
	set("hourly", utc(2024, 5, 1, 1, 0, 0))
	set("minutely", utc(2024, 5, 1, 5, 10, 0))
	set("short-outage", utc(2024, 5, 1, 5, 27, 0))
	w.clock.Set(utc(2024, 5, 1, 5, 30, 10))
	st := mustFire(t, s)
	ts := func(rs []run) (out []string) {
		for _, r := range rs {
			out = append(out, time.UnixMilli(r.runTS).UTC().Format("15:04"))
		}
		return out
	}
	check := func(id string, want []string, missed int64, next time.Time) {
		t.Helper()
		got := ts(w.runsOf(t, id))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s fired %v, want %v", id, got, want)
		}
		tr := w.triggers(t, id)[0]
		if tr.Missed != missed || !tr.NextFire.Equal(next) {
			t.Errorf("%s: missed %d (want %d), next %v (want %v)", id, tr.Missed, missed, tr.NextFire, next)
		}
	}
	check("hourly", []string{"05:00"}, 4, utc(2024, 5, 1, 6, 0, 0))
	check("minutely", []string{"05:26", "05:27", "05:28", "05:29", "05:30"}, 16, utc(2024, 5, 1, 5, 31, 0))
	check("short-outage", []string{"05:27", "05:28", "05:29", "05:30"}, 0, utc(2024, 5, 1, 5, 31, 0))
	if st.Missed != 20 || st.Started != 10 {
		t.Errorf("stats %+v", st)
	}
}

// Daylight-saving changes in the trigger's zone: a daily 02:30 fires at
// 03:00 on the night 02:00-03:00 is skipped, a daily 01:30 fires once on
// the night 01:00-02:00 repeats, walking the clock minute by minute.
func TestDaylightSavingNights(t *testing.T) {
	t.Parallel()
	la, _ := time.LoadLocation("America/Los_Angeles")
	for _, c := range []struct {
		name, cron string
		from, to   time.Time
		want       []string
	}{
		{"skipped hour", "30 2 * * *", time.Date(2024, 3, 9, 12, 0, 0, 0, la), time.Date(2024, 3, 11, 12, 0, 0, 0, la),
			[]string{"2024-03-10 03:00 PDT", "2024-03-11 02:30 PDT"}},
		{"repeated hour", "30 1 * * *", time.Date(2024, 11, 2, 12, 0, 0, 0, la), time.Date(2024, 11, 4, 12, 0, 0, 0, la),
			[]string{"2024-11-03 01:30 PDT", "2024-11-04 01:30 PST"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.clock.Set(c.from)
			w.push(t, "dst", fmt.Sprintf(`[{"cron":%q,"timezone":"America/Los_Angeles"}]`, c.cron))
			s := w.scheduler(t, Config{})
			for now := c.from; now.Before(c.to); now = now.Add(time.Minute) {
				w.clock.Set(now)
				mustFire(t, s)
			}
			var got []string
			for _, r := range w.runsOf(t, "dst") {
				got = append(got, time.UnixMilli(r.runTS).In(la).Format("2006-01-02 15:04 MST"))
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("fired %v, want %v", got, c.want)
			}
		})
	}
}

// Deactivating a workflow, or disabling its time triggers, stops them at
// once; re-enabling does not fire the backlog.
func TestLifecycleStopsAndRestartsTriggers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	// The test clock runs an hour behind: re-enabling (which uses the real
	// clock, as the definition store does) then starts after every fire
	// time the test clock reached.
	w.clock.Set(time.Now().Add(-time.Hour))
	w.push(t, "wf", `[{"cron":"* * * * *"}]`)
	s := w.scheduler(t, Config{})
	owner := definition.Actor{Name: "o"}
	later := func(d time.Duration) { w.clock.Set(w.clock.Now().Add(d)) }

	later(2 * time.Minute)
	if st := mustFire(t, s); st.Started != 2 {
		t.Fatalf("two minutes later: %+v", st)
	}
	if _, err := w.defs.Deactivate(ctx, "wf", owner); err != nil {
		t.Fatal(err)
	}
	later(10 * time.Minute)
	if st := mustFire(t, s); st.Claimed != 0 {
		t.Fatalf("an inactive workflow's trigger fired: %+v", st)
	}
	if _, err := w.defs.Activate(ctx, "wf", "latest", owner); err != nil {
		t.Fatal(err)
	}
	if _, err := w.defs.UpdateProperties(ctx, "wf", workflow.PropertiesChange{Set: &workflow.Properties{TimeTriggerDisabled: ptr(true)}}, owner); err != nil {
		t.Fatal(err)
	}
	later(10 * time.Minute)
	if st := mustFire(t, s); st.Claimed != 0 {
		t.Fatalf("a disabled trigger fired: %+v", st)
	}
	// Re-enabled with the real clock: the next fire time is after now, so
	// the backlog of the disabled minutes never fires.
	if _, err := w.defs.UpdateProperties(ctx, "wf", workflow.PropertiesChange{Set: &workflow.Properties{TimeTriggerDisabled: ptr(false)}}, owner); err != nil {
		t.Fatal(err)
	}
	tr := w.triggers(t, "wf")[0]
	if tr.State != trigger.StateActive || !tr.NextFire.After(time.Now()) {
		t.Fatalf("re-enabled: %+v", tr.Trigger)
	}
	w.clock.Set(*tr.NextFire)
	if st := mustFire(t, s); st.Started != 1 || st.Missed != 0 {
		t.Fatalf("after re-enabling: %+v, want exactly the next fire time", st)
	}
}

func ptr[T any](v T) *T { return &v }

// A scheduler that dies mid-batch (here: its transaction is rolled back
// after the runs were created) leaves neither runs nor advanced triggers;
// the next pass fires the same fire times.
func TestInterruptedBatchRollsBackEverything(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.clock.Set(utc(2024, 5, 1, 9, 59, 30))
	w.push(t, "a", `[{"cron":"* * * * *"}]`)
	w.push(t, "b", `[{"cron":"* * * * *"}]`)
	w.clock.Set(utc(2024, 5, 1, 10, 0, 1))
	ctx, cancel := context.WithCancel(context.Background())
	s := w.scheduler(t, Config{})
	s.testHookInTx = func(claimed int) { cancel() }
	if _, err := s.FireDue(ctx); err == nil {
		t.Fatal("the interrupted batch reported success")
	}
	if n := len(w.runsOf(t, "a")) + len(w.runsOf(t, "b")); n != 0 {
		t.Fatalf("%d runs survived the rollback", n)
	}
	s.testHookInTx = nil
	// The cancelled transaction's connection is closed and the server rolls
	// it back on its own time: until it has, the claim skips its locked
	// triggers. Fire again until both have started, and only once each.
	started := 0
	for deadline := time.Now().Add(10 * time.Second); started < 2 && time.Now().Before(deadline); {
		st := mustFire(t, s)
		started += st.Started
		if started < 2 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if started != 2 {
		t.Fatalf("after the rollback %d starts, want 2", started)
	}
	if r := w.runsOf(t, "a"); len(r) != 1 || r[0].runTS != utc(2024, 5, 1, 10, 0, 0).UnixMilli() {
		t.Fatalf("runs %+v", r)
	}
}

// A start the workflow's params refuse (a CONSTANT RUN_TS) does not stop
// the trigger: it moves on and records why.
func TestRefusedStartIsRecorded(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.clock.Set(utc(2024, 5, 1, 9, 59, 30))
	w.push(t, "const", `[{"cron":"* * * * *"}]`, `,"params":{"RUN_TS":{"type":"LONG","value":1,"mode":"CONSTANT"}}`)
	w.clock.Set(utc(2024, 5, 1, 10, 0, 1))
	s := w.scheduler(t, Config{})
	if st := mustFire(t, s); st.Refused != 1 || st.Started != 0 {
		t.Fatalf("stats %+v", st)
	}
	tr := w.triggers(t, "const")[0]
	if tr.Error == "" || !tr.NextFire.Equal(utc(2024, 5, 1, 10, 1, 0)) || tr.LastFire != nil {
		t.Fatalf("trigger %+v", tr.Trigger)
	}
}

// The Lambda handler fires what is due and stops short of its deadline.
func TestHandleScheduled(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.clock.Set(utc(2024, 5, 1, 9, 59, 30))
	w.push(t, "wf", `[{"cron":"* * * * *"}]`)
	w.clock.Set(utc(2024, 5, 1, 10, 0, 7))
	var emf bytes.Buffer
	s := w.scheduler(t, Config{DeadlineMargin: time.Minute, Metrics: metrics.New(&emf, metrics.ServiceTimeTrigger)})
	ev := json.RawMessage(`{"scheduled_time":"2024-05-01T10:00:00Z","execution_id":"x","attempt":"1"}`)
	short, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if st, err := s.HandleScheduled(short, ev); err != nil || st.Claimed != 0 {
		t.Fatalf("within the deadline margin: %+v %v", st, err)
	}
	if emf.Len() != 0 {
		t.Errorf("an invocation that started nothing wrote metrics: %s", emf.String())
	}
	long, cancel2 := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel2()
	if st, err := s.HandleScheduled(long, ev); err != nil || st.Started != 1 || st.MaxLag != 7*time.Second {
		t.Fatalf("invocation: %+v %v", st, err)
	}
	// The run due at 10:00:00 started at 10:00:07 (the test clock): the
	// invocation wrote one TriggerLag of 7 s, as the alarm reads it.
	got, err := metrics.Parse(emf.Bytes())
	want := []metrics.Datum{{Namespace: metrics.Namespace, Name: metrics.TriggerLag, Unit: metrics.UnitSeconds,
		Dimensions: map[string]string{metrics.DimensionService: metrics.ServiceTimeTrigger}, Values: []float64{7}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("metrics %s: %+v (%v), want %+v", emf.String(), got, err, want)
	}
	emf.Reset()
	if st, err := s.HandleScheduled(long, json.RawMessage(`"not an object"`)); err != nil || st.Claimed != 0 {
		t.Fatalf("an event of another shape: %+v %v", st, err)
	}
	if emf.Len() != 0 {
		t.Errorf("an invocation that started nothing wrote metrics: %s", emf.String())
	}
}

// The service ticks until stopped, and stops cleanly (twice is fine).
func TestServiceStartStop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("github.com/jackc/puddle/v2.(*Pool).acquire.func1"))
	w := newWorld(t)
	w.clock.Set(utc(2024, 5, 1, 9, 59, 30))
	w.push(t, "wf", `[{"cron":"* * * * *"}]`)
	w.clock.Set(utc(2024, 5, 1, 10, 0, 1))
	svc := NewService(w.scheduler(t, Config{Tick: 20 * time.Millisecond}))
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err == nil {
		t.Error("a second Start succeeded")
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(w.runsOf(t, "wf")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the service never fired the due trigger")
		}
		time.Sleep(10 * time.Millisecond)
	}
	svc.Stop()
	svc.Stop()
	w.pool.Close()
}

// FromEnv keeps what the caller configured (logger, metrics) and takes the
// settings the environment gives; a malformed one is an error.
func TestFromEnv(t *testing.T) {
	w := newWorld(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	emitter := metrics.New(io.Discard, metrics.ServiceTimeTrigger)
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	s, err := FromEnv(w.pool, w.runs, Config{Logger: logger, Metrics: emitter, CatchUp: time.Hour},
		env(map[string]string{EnvTick: "5s", EnvBatch: "50", EnvWorkers: "3"}))
	if err != nil {
		t.Fatal(err)
	}
	if c := s.cfg; c.Metrics != emitter || c.Tick != 5*time.Second || c.BatchSize != 50 || c.Workers != 3 || c.CatchUp != time.Hour {
		t.Errorf("config %+v", c)
	}
	for _, bad := range []map[string]string{{EnvTick: "soon"}, {EnvCatchUp: "-1m"}, {EnvBatch: "0"}, {EnvWorkers: "x"}} {
		if _, err := FromEnv(w.pool, w.runs, Config{Logger: logger}, env(bad)); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if _, err := FromEnv(w.pool, w.runs, Config{}, env(nil)); err == nil {
		t.Error("no logger: no error")
	}
}
