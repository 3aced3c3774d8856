package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/trigger/schedule"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Sync brings a workflow's time_trigger rows in step with its active
// version and properties, inside tx, where the caller holds the workflow's
// lock (every definition change takes it). A trigger the new active version
// keeps unchanged (same Maestro key) keeps its schedule and history; a new
// trigger, and one re-enabled after time_trigger_disabled, fires from now
// on, without a backlog; a workflow without an active version (deactivated)
// keeps none. now is the time of the change.
func Sync(ctx context.Context, tx pgx.Tx, workflowID string, now time.Time) error {
	b := &pgx.Batch{}
	var (
		exists   bool
		version  *int64
		disabled bool
		defs     []byte
	)
	b.Queue(sqlSyncState, workflowID).QueryRow(func(r pgx.Row) error {
		err := r.Scan(&version, &disabled, &defs)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		exists = err == nil
		return err
	})
	var old []Trigger
	b.Queue(sqlSelectTriggers, workflowID).Query(func(rows pgx.Rows) error {
		var err error
		old, err = pgx.CollectRows(rows, scanTrigger)
		return err
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("read time triggers of %s: %w", workflowID, err)
	}
	var want []Trigger
	if exists && version != nil && len(defs) > 0 {
		var tts []workflow.TimeTrigger
		if err := json.Unmarshal(defs, &tts); err != nil {
			return fmt.Errorf("decode time triggers of %s version %d: %w", workflowID, *version, err)
		}
		var err error
		if want, err = desired(workflowID, *version, tts, disabled, old, now); err != nil {
			return err
		}
	}
	if sameRows(old, want) {
		return nil
	}
	if err := checkTransitions(old, want); err != nil {
		return fmt.Errorf("time triggers of %s: %w", workflowID, err)
	}
	if _, err := tx.Exec(ctx, sqlDeleteTriggers, workflowID); err != nil {
		return fmt.Errorf("replace time triggers of %s: %w", workflowID, err)
	}
	if len(want) == 0 {
		return nil
	}
	rows, err := json.Marshal(want)
	if err != nil {
		return fmt.Errorf("encode time triggers of %s: %w", workflowID, err)
	}
	if _, err := tx.Exec(ctx, sqlInsertTriggers, workflowID, rows); err != nil {
		return fmt.Errorf("replace time triggers of %s: %w", workflowID, err)
	}
	return nil
}

// desired computes the rows of a version's triggers.
func desired(workflowID string, version int64, tts []workflow.TimeTrigger, disabled bool, old []Trigger, now time.Time) ([]Trigger, error) {
	sts := make([]schedule.Trigger, len(tts))
	keys := make([]string, len(tts))
	for i := range tts {
		sts[i] = tts[i].ScheduleTrigger()
		keys[i] = schedule.Key(sts[i])
	}
	setUUID := schedule.SetUUID(keys)
	used := make([]bool, len(old))
	out := make([]Trigger, len(tts))
	for i := range tts {
		def, err := json.Marshal(&tts[i])
		if err != nil {
			return nil, fmt.Errorf("encode time trigger %d of %s: %w", i, workflowID, err)
		}
		row := Trigger{WorkflowID: workflowID, Index: i, Version: version, Key: keys[i], UUID: setUUID, Definition: def,
			Timezone: sts[i].Timezone}
		if row.Timezone == "" {
			row.Timezone = schedule.DefaultTimezone
		}
		var match *Trigger
		for j := range old {
			if !used[j] && old[j].Key == keys[i] {
				used[j], match = true, &old[j]
				row.LastFire, row.LastInstanceID, row.LastFiredAt, row.Missed = match.LastFire, match.LastInstanceID, match.LastFiredAt, match.Missed
				break
			}
		}
		c, err := schedule.Compile(sts[i])
		switch {
		case err != nil:
			row.State, row.Error = StateInvalid, err.Error()
		case disabled:
			row.State, row.DelaySeconds = StateDisabled, int(c.Delay(workflowID)/time.Second)
		case match != nil && (match.State == StateActive || match.State == StateExhausted):
			// Unchanged: it keeps its schedule (the delay, a function of
			// the key, is the same).
			row.State, row.DelaySeconds, row.NextSchedule, row.NextFire, row.Error =
				match.State, match.DelaySeconds, match.NextSchedule, match.NextFire, match.Error
		default:
			d := c.Delay(workflowID)
			row.DelaySeconds = int(d / time.Second)
			row.State = StateExhausted
			if next := c.Next(now.Add(-d)); !next.IsZero() {
				fire := next.Add(d)
				row.State, row.NextSchedule, row.NextFire = StateActive, &next, &fire
			}
		}
		out[i] = row
	}
	return out, nil
}

// checkTransitions checks every row's change against the lifecycle: rows
// are matched by key, unmatched old rows go away, unmatched new ones come.
func checkTransitions(old, want []Trigger) error {
	used := make([]bool, len(old))
	for _, w := range want {
		from := State("")
		for j := range old {
			if !used[j] && old[j].Key == w.Key {
				used[j], from = true, old[j].State
				break
			}
		}
		if err := Transition(from, w.State); err != nil {
			return fmt.Errorf("trigger %d: %w", w.Index, err)
		}
	}
	for j, o := range old {
		if !used[j] {
			if err := Transition(o.State, ""); err != nil {
				return fmt.Errorf("trigger %d: %w", o.Index, err)
			}
		}
	}
	return nil
}

// sameRows reports whether the stored rows already are the wanted ones.
func sameRows(old, want []Trigger) bool {
	if len(old) != len(want) {
		return false
	}
	for i := range old {
		a, b := old[i], want[i]
		if !sameJSON(a.Definition, b.Definition) {
			return false
		}
		a.Definition, b.Definition = nil, nil
		if !reflect.DeepEqual(normalise(a), normalise(b)) {
			return false
		}
	}
	return true
}

// normalise drops what the database rounds (time below a microsecond) and
// the zone of stored times.
func normalise(t Trigger) Trigger {
	for _, p := range []**time.Time{&t.NextSchedule, &t.NextFire, &t.LastFire, &t.LastFiredAt} {
		if *p != nil {
			v := (*p).UTC().Truncate(time.Microsecond)
			*p = &v
		}
	}
	return t
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
