package trigger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/trigger"
	"github.com/maestro-aws/maestro/engine/workflow"
)

func push(t *testing.T, defs *definition.Store, doc string) {
	t.Helper()
	d, err := workflow.DecodeJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := (workflow.Validator{}).Validate(d); err != nil {
		t.Fatal(err)
	}
	if _, err := defs.Create(context.Background(), d, "owner"); err != nil {
		t.Fatal(err)
	}
}

func list(t *testing.T, pool *pgxpool.Pool, id string) []trigger.Listed {
	t.Helper()
	ts, err := trigger.List(context.Background(), pool, id)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

const twoTriggers = `{"properties":{"owner":"owner"},"workflow":{"id":"wf","time_triggers":[
	{"type":"CRON","cron":"0 0 12 1/1 * ? *","timezone":"US/Pacific"},
	{"type":"PREDEFINED","expression":"@hourly","fuzzy_max_delay":"10 min"}],
	"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`

// The rows follow the active version through pushes, property changes,
// deactivation, activation and deletion, each in the change's transaction.
func TestTriggersFollowTheActiveVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	before := time.Now()
	push(t, defs, twoTriggers)
	ts := list(t, pool, "wf")
	if len(ts) != 2 {
		t.Fatalf("%d triggers after the first push, want 2", len(ts))
	}
	for _, tr := range ts {
		if tr.State != trigger.StateActive || tr.NextFire == nil || !tr.NextFire.After(before) || tr.Version != 1 {
			t.Errorf("trigger %d: %+v, want ACTIVE at version 1 firing after the push", tr.Index, tr.Trigger)
		}
		if tr.UUID != ts[0].UUID {
			t.Errorf("trigger uuids differ within a version: %s and %s", tr.UUID, ts[0].UUID)
		}
	}
	if ts[0].Key != "CronTimeTrigger(cron=0 0 12 1/1 * ? *, timezone=US/Pacific)" || ts[0].Timezone != "US/Pacific" ||
		ts[1].Timezone != "UTC" {
		t.Errorf("keys and zones: %q %q %q", ts[0].Key, ts[0].Timezone, ts[1].Timezone)
	}
	if d := ts[1].DelaySeconds; d < 0 || d >= 600 || ts[1].NextFire.Sub(*ts[1].NextSchedule) != time.Duration(d)*time.Second {
		t.Errorf("fuzzy delay %d s, schedule %v, fire %v", d, ts[1].NextSchedule, ts[1].NextFire)
	}
	noon, v1UUID := *ts[0].NextFire, ts[0].UUID

	// Trigger 0 fired once; a new version keeps it unchanged and replaces
	// trigger 1: trigger 0 keeps its schedule and history.
	if _, err := pool.Exec(ctx, `UPDATE time_trigger SET last_fire_at = now(), last_instance_id = 7 WHERE trigger_index = 0`); err != nil {
		t.Fatal(err)
	}
	push(t, defs, `{"workflow":{"id":"wf","time_triggers":[{"type":"CRON","cron":"0 0 12 1/1 * ? *","timezone":"US/Pacific"},
		{"type":"CRON","cron":"*/5 * * * *"}],"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	ts = list(t, pool, "wf")
	if len(ts) != 2 || ts[0].Version != 2 || !ts[0].NextFire.Equal(noon) || ts[0].LastInstanceID == nil || *ts[0].LastInstanceID != 7 {
		t.Fatalf("kept trigger after a new version: %+v", ts[0].Trigger)
	}
	if ts[1].Key != "CronTimeTrigger(cron=*/5 * * * *, timezone=null)" || ts[1].LastInstanceID != nil {
		t.Errorf("new trigger: %+v", ts[1].Trigger)
	}
	if ts[0].UUID == v1UUID || ts[1].UUID != ts[0].UUID {
		t.Errorf("the trigger uuid is the version's set's: %s at v1, %s and %s at v2", v1UUID, ts[0].UUID, ts[1].UUID)
	}

	// A backlog builds up while disabled: re-enabling fires from now on.
	if _, err := pool.Exec(ctx, `UPDATE time_trigger SET next_schedule_at = now() - interval '3 days',
            next_fire_at = now() - interval '3 days'`); err != nil {
		t.Fatal(err)
	}
	if _, err := defs.UpdateProperties(ctx, "wf", workflow.PropertiesChange{Set: &workflow.Properties{TimeTriggerDisabled: ptr(true)}}, definition.Actor{Name: "owner"}); err != nil {
		t.Fatal(err)
	}
	for _, tr := range list(t, pool, "wf") {
		if tr.State != trigger.StateDisabled || tr.NextFire != nil {
			t.Errorf("disabled: %+v", tr.Trigger)
		}
	}
	enabledAt := time.Now()
	if _, err := defs.UpdateProperties(ctx, "wf", workflow.PropertiesChange{Set: &workflow.Properties{TimeTriggerDisabled: ptr(false)}}, definition.Actor{Name: "owner"}); err != nil {
		t.Fatal(err)
	}
	for _, tr := range list(t, pool, "wf") {
		if tr.State != trigger.StateActive || !tr.NextFire.After(enabledAt) || tr.LastInstanceID == nil && tr.Index == 0 {
			t.Errorf("re-enabled: %+v, want ACTIVE from now on with its history", tr.Trigger)
		}
	}

	if _, err := defs.Deactivate(ctx, "wf", definition.Actor{Name: "owner"}); err != nil {
		t.Fatal(err)
	}
	if n := len(list(t, pool, "wf")); n != 0 {
		t.Fatalf("%d triggers of an inactive workflow", n)
	}
	if _, err := defs.Activate(ctx, "wf", "1", definition.Actor{Name: "owner"}); err != nil {
		t.Fatal(err)
	}
	ts = list(t, pool, "wf")
	if len(ts) != 2 || ts[1].Key != "PredefinedTimeTrigger(expression=HOURLY, timezone=null, fuzzyMaxDelay=\"10 min\")" || ts[0].Version != 1 {
		t.Fatalf("activating version 1 brings its triggers back: %+v", ts)
	}
	if _, err := defs.Delete(ctx, "wf", definition.Actor{Name: "owner"}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM time_trigger`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d trigger rows after delete (%v)", n, err)
	}
}

// A change that leaves the active version's triggers as they are writes
// no trigger row: a properties change that does not touch
// time_trigger_disabled, and a new version pushed inactive.
func TestUnrelatedChangesLeaveRowsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	push(t, defs, twoTriggers)
	stamp := func() (s string) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT string_agg(xmin::text || '/' || workflow_version, ',' ORDER BY trigger_index) FROM time_trigger`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := stamp()
	if _, err := defs.UpdateProperties(ctx, "wf", workflow.PropertiesChange{Set: &workflow.Properties{Description: ptr("nightly")}}, definition.Actor{Name: "owner"}); err != nil {
		t.Fatal(err)
	}
	push(t, defs, `{"is_active":false,"workflow":{"id":"wf","description":"v2","time_triggers":[{"cron":"* * * * *"}],
		"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	if after := stamp(); after != before {
		t.Errorf("rows rewritten (xmin/version %s, then %s)", before, after)
	}
}

func ptr[T any](v T) *T { return &v }

// A stored definition that no longer compiles (an older, looser parser
// accepted it) is kept, INVALID, with the reason, and never fires; the
// change that synced it does not fail.
func TestStoredTriggerThatNoLongerCompiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	push(t, defs, `{"workflow":{"id":"old","time_triggers":[{"cron":"0 * * * *"}],"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	if _, err := pool.Exec(ctx, `UPDATE workflow_version SET definition = jsonb_set(definition, '{time_triggers,0,cron}', '"@every 1h"')`); err != nil {
		t.Fatal(err)
	}
	if _, err := defs.Deactivate(ctx, "old", definition.Actor{Name: "owner"}); err != nil {
		t.Fatal(err)
	}
	if _, err := defs.Activate(ctx, "old", "1", definition.Actor{Name: "owner"}); err != nil {
		t.Fatal(err)
	}
	ts := list(t, pool, "old")
	if len(ts) != 1 || ts[0].State != trigger.StateInvalid || ts[0].Error == "" || ts[0].NextFire != nil {
		t.Fatalf("%+v", ts)
	}
}

// Workflows that had time triggers before the table existed are listed
// as pending by the migration; SyncPending builds their rows.
func TestSyncPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	push(t, defs, twoTriggers)
	if _, err := pool.Exec(ctx, `DELETE FROM time_trigger; INSERT INTO time_trigger_pending VALUES ('wf')`); err != nil {
		t.Fatal(err)
	}
	n, err := trigger.SyncPending(ctx, pool, time.Now(), 10)
	if err != nil || n != 1 {
		t.Fatalf("synced %d (%v)", n, err)
	}
	if got := len(list(t, pool, "wf")); got != 2 {
		t.Fatalf("%d rows after the pending sync", got)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM time_trigger_pending`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d pending rows left (%v)", left, err)
	}
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		from, to trigger.State
		ok       bool
	}{
		{"", trigger.StateActive, true},
		{trigger.StateActive, trigger.StateExhausted, true},
		{trigger.StateDisabled, trigger.StateActive, true},
		{trigger.StateExhausted, trigger.StateActive, false},
		{trigger.StateInvalid, trigger.StateActive, false},
		{trigger.StateActive, "", true},
	} {
		err := trigger.Transition(c.from, c.to)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, trigger.ErrInvalidTransition)) {
			t.Errorf("%q -> %q: %v", c.from, c.to, err)
		}
	}
}
