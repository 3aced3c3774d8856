// Package eventtest checks, for tests, that a set of delivered events is
// exactly the status changes the database holds: every status change of
// every run and step attempt in exactly one event, in order, and no event
// for a change that did not commit.
package eventtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
)

// Collected is a set of external events as a consumer received them,
// duplicates included.
type Collected struct {
	raw [][]byte
}

// Add records one delivered event (its JSON).
func (c *Collected) Add(b []byte) { c.raw = append(c.raw, append([]byte(nil), b...)) }

// Len is how many deliveries there were.
func (c *Collected) Len() int { return len(c.raw) }

// Report is what Verify found.
type Report struct {
	// Deliveries and Unique count the events received, and the distinct
	// ones.
	Deliveries, Unique int
	// InstanceChanges and StepChanges count the status changes checked.
	InstanceChanges, StepChanges int
}

type head struct {
	EventID string     `json:"event_id"`
	Type    event.Type `json:"type"`
}

type instanceKey struct {
	wf       string
	iid, run int64
}

type stepKey struct {
	instanceKey
	step    string
	attempt int64
}

// Verify checks the events against the runs and step attempts of the
// given workflows (their inline runs included): deduplicated by event_id
// (a duplicate must be the same event), each run's events ordered by seq
// must chain its timeline's status changes from CREATED, and each
// attempt's records, by seq, its timeline's status changes from
// NOT_CREATED, with their times. A step attempt carried over by a restart
// has no events.
func (c *Collected) Verify(ctx context.Context, db *pgxpool.Pool, workflowIDs ...string) (Report, error) {
	rep := Report{Deliveries: len(c.raw)}
	seen := map[string][]byte{}
	runs := map[instanceKey][]event.WorkflowInstanceStatusChangeEvent{}
	steps := map[stepKey][]event.StepInstanceStatusChangeEvent{}
	for _, b := range c.raw {
		var h head
		if err := json.Unmarshal(b, &h); err != nil {
			return rep, fmt.Errorf("event is not JSON: %s", b)
		}
		if prev, dup := seen[h.EventID]; dup {
			if !sameEvent(prev, b) {
				return rep, fmt.Errorf("event %s delivered twice with different content:\n%s\n%s", h.EventID, prev, b)
			}
			continue
		}
		seen[h.EventID] = b
		switch h.Type {
		case event.WorkflowInstanceStatusChange:
			var e event.WorkflowInstanceStatusChangeEvent
			if err := json.Unmarshal(b, &e); err != nil {
				return rep, err
			}
			if !ofWorkflows(e.WorkflowID, workflowIDs) {
				continue
			}
			k := instanceKey{e.WorkflowID, e.WorkflowInstanceID, e.WorkflowRunID}
			runs[k] = append(runs[k], e)
		case event.StepInstanceStatusChange:
			var e event.StepInstanceStatusChangeEvent
			if err := json.Unmarshal(b, &e); err != nil {
				return rep, err
			}
			if !ofWorkflows(e.WorkflowID, workflowIDs) {
				continue
			}
			k := stepKey{instanceKey{e.WorkflowID, e.WorkflowInstanceID, e.WorkflowRunID}, e.StepID, e.StepAttemptID}
			steps[k] = append(steps[k], e)
		}
	}
	rep.Unique = len(seen)

	rows, err := db.Query(ctx, `SELECT workflow_id, instance_id, run_id, timeline FROM workflow_instance
        WHERE split_part(workflow_id, ':', 1) = ANY ($1::text[])`, workflowIDs)
	if err != nil {
		return rep, err
	}
	wantRuns := map[instanceKey][]instance.TimelineEvent{}
	for rows.Next() {
		var k instanceKey
		var tl []instance.TimelineEvent
		if err := rows.Scan(&k.wf, &k.iid, &k.run, &tl); err != nil {
			rows.Close()
			return rep, err
		}
		wantRuns[k] = tl
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rep, err
	}
	for k, tl := range wantRuns {
		var want [][2]string
		prev := ""
		for _, ev := range tl {
			if ev.Type != "STATUS" {
				continue
			}
			if prev != "" {
				want = append(want, [2]string{prev, ev.Status})
			}
			prev = ev.Status
		}
		got := runs[k]
		slices.SortFunc(got, func(a, b event.WorkflowInstanceStatusChangeEvent) int { return int(a.Seq - b.Seq) })
		var have [][2]string
		for _, e := range got {
			have = append(have, [2]string{string(e.OldStatus), string(e.NewStatus)})
		}
		if !slices.Equal(have, want) {
			return rep, fmt.Errorf("run %s/%d/%d: events %v, status changes %v", k.wf, k.iid, k.run, have, want)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Seq == got[i-1].Seq {
				return rep, fmt.Errorf("run %s/%d/%d: two events with seq %d", k.wf, k.iid, k.run, got[i].Seq)
			}
		}
		rep.InstanceChanges += len(want)
		delete(runs, k)
	}
	for k := range runs {
		return rep, fmt.Errorf("events of run %s/%d/%d, which the database does not hold", k.wf, k.iid, k.run)
	}

	rows, err = db.Query(ctx, `SELECT workflow_id, instance_id, run_id, step_id, attempt_id, timeline,
            runtime_state ? 'carried_from', status = 'SKIPPED'
        FROM step_instance WHERE split_part(workflow_id, ':', 1) = ANY ($1::text[])`, workflowIDs)
	if err != nil {
		return rep, err
	}
	type stepRow struct {
		tl               []instance.TimelineEvent
		carried, skipped bool
	}
	wantSteps := map[stepKey]stepRow{}
	for rows.Next() {
		var k stepKey
		var r stepRow
		if err := rows.Scan(&k.wf, &k.iid, &k.run, &k.step, &k.attempt, &r.tl, &r.carried, &r.skipped); err != nil {
			rows.Close()
			return rep, err
		}
		wantSteps[k] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rep, err
	}
	for k, r := range wantSteps {
		var want []event.StatusChangeRecord
		prev := instance.StepNotCreated
		for _, ev := range r.tl {
			if ev.Type != "STATUS" {
				continue
			}
			want = append(want, event.StatusChangeRecord{OldStatus: prev, NewStatus: instance.StepStatus(ev.Status), EventTime: ev.Timestamp})
			prev = instance.StepStatus(ev.Status)
		}
		got := steps[k]
		delete(steps, k)
		if r.carried {
			// Copied by a restart: no status change in this run, unless the
			// restart skipped it (NOT_CREATED -> SKIPPED).
			ok := len(got) == 0 || (r.skipped && len(got) == 1 && len(got[0].StatusChangeRecords) == 1 &&
				got[0].StatusChangeRecords[0].NewStatus == instance.StepSkipped)
			if !ok {
				return rep, fmt.Errorf("step %s of %s/%d/%d was carried over by a restart, yet has events %v", k.step, k.wf, k.iid, k.run, got)
			}
			rep.StepChanges += len(got)
			continue
		}
		slices.SortFunc(got, func(a, b event.StepInstanceStatusChangeEvent) int { return int(a.Seq - b.Seq) })
		var have []event.StatusChangeRecord
		for i, e := range got {
			if i > 0 && e.Seq == got[i-1].Seq {
				return rep, fmt.Errorf("step %s attempt %d of %s/%d/%d: two events with seq %d", k.step, k.attempt, k.wf, k.iid, k.run, e.Seq)
			}
			have = append(have, e.StatusChangeRecords...)
		}
		if !slices.Equal(have, want) {
			return rep, fmt.Errorf("step %s attempt %d of %s/%d/%d: records %v, status changes %v", k.step, k.attempt, k.wf, k.iid, k.run, have, want)
		}
		rep.StepChanges += len(want)
	}
	for k := range steps {
		return rep, fmt.Errorf("events of step %s attempt %d of %s/%d/%d, which the database does not hold", k.step, k.attempt, k.wf, k.iid, k.run)
	}
	return rep, nil
}

// sameEvent reports whether two deliveries are the same event: equal but
// for send_time.
func sameEvent(a, b []byte) bool {
	var x, y map[string]any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	delete(x, "send_time")
	delete(y, "send_time")
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func ofWorkflows(id string, ids []string) bool {
	root, _, _ := strings.Cut(id, ":")
	return slices.Contains(ids, root)
}

// FromOutbox collects every event still in the outbox, as a consumer would
// receive them.
func FromOutbox(ctx context.Context, db *pgxpool.Pool) (*Collected, error) {
	c := &Collected{}
	var pos event.Position
	for {
		// Every writer of the test has finished: nothing is left behind
		// the horizon but other tests' short transactions.
		evs, err := event.ReadAfter(ctx, db, pos, 1000)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			var pending bool
			if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM maestro_event WHERE (tx, event_id) > ($1::xid8, $2::bigint))`,
				pos.TX, pos.ID).Scan(&pending); err != nil {
				return nil, err
			}
			if !pending {
				return c, nil
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for _, e := range evs {
			b, _, err := event.Render(event.Wire(e), "", "", time.Now())
			if err != nil {
				return nil, err
			}
			c.Add(b)
		}
		pos = evs[len(evs)-1].Position
	}
}
