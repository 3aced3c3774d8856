package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// The service's SQL, named and kept together. Tables are in
// migrations/00030_events.sql.

// sqlConfigs reads the alerting block of workflows that have one and have
// not disabled alerting.
const sqlConfigs = `
SELECT workflow_id, properties->'alerting', internal_id FROM workflow
WHERE workflow_id = ANY ($1::text[]) AND properties ? 'alerting'
  AND NOT COALESCE((properties->>'alerting_disabled')::boolean, false)`

// sqlRaise records an alert under its key and, if it is the first of its
// key, writes it as an event: a second alert of a run and type is a no-op.
const sqlRaise = `
WITH a AS (
    INSERT INTO maestro_alert (alert_key, workflow_id, alert_type) VALUES ($1, $2, $3)
    ON CONFLICT DO NOTHING RETURNING 1)
` + event.InsertSQL + `
SELECT $4::smallint, $2, NULL::bigint, $5::json FROM a`

const sqlArm = `
INSERT INTO maestro_alert_timer (workflow_id, instance_id, run_id, alert_type, step_id, attempt_id, due_at, details)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (workflow_id, instance_id, run_id, alert_type, step_id, attempt_id) DO NOTHING`

const sqlRearm = `
INSERT INTO maestro_alert_timer (workflow_id, instance_id, run_id, alert_type, step_id, attempt_id, due_at, details)
VALUES ($1, $2, $3, $4, '', 0, $5, $6)
ON CONFLICT (workflow_id, instance_id, run_id, alert_type, step_id, attempt_id) DO UPDATE SET due_at = EXCLUDED.due_at,
    details = EXCLUDED.details`

const sqlRunTimers = `
DELETE FROM maestro_alert_timer WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
RETURNING alert_type, due_at, details`

const sqlWorkflowTimers = `DELETE FROM maestro_alert_timer WHERE workflow_id = $1`

// sqlDue takes the due timers; another node firing timers skips them.
const sqlDue = `
SELECT workflow_id, instance_id, run_id, alert_type, step_id, attempt_id, due_at, details
FROM maestro_alert_timer WHERE due_at <= now() ORDER BY due_at LIMIT $1 FOR UPDATE SKIP LOCKED`

const sqlDeleteTimer = `
DELETE FROM maestro_alert_timer
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND alert_type = $4 AND step_id = $5 AND attempt_id = $6`

const sqlRun = `
SELECT uuid::text, status, group_id, params, create_time, start_time, end_time FROM workflow_instance
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`

const sqlStep = `
SELECT status, COALESCE(runtime_state->>'message', '') FROM step_instance
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 AND attempt_id = $5`

// sqlUsualDuration is the median duration, in seconds, of a workflow's
// last ten succeeded runs, and how many there were.
const sqlUsualDuration = `
SELECT COALESCE(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM end_time - start_time)), 0), count(*)
FROM (SELECT start_time, end_time FROM workflow_instance
      WHERE workflow_id = $1 AND status = 'SUCCEEDED' AND start_time IS NOT NULL AND end_time IS NOT NULL
      ORDER BY instance_id DESC, run_id DESC LIMIT 10) r`

const sqlSucceededSince = `
SELECT EXISTS (SELECT 1 FROM workflow_instance WHERE workflow_id = $1 AND status = 'SUCCEEDED' AND end_time > $2)`

const sqlForgetAlerts = `DELETE FROM maestro_alert WHERE created_at < now() - $1::interval`

// timerBatch is how many due timers one transaction fires.
const timerBatch = 100

var alertKind, _ = event.KindOf(event.Alert)

func eventEnsureReader(ctx context.Context, db *pgxpool.Pool) error {
	return event.EnsureReader(ctx, db, Reader)
}

// config is a workflow's alerting block.
type config struct {
	a          *workflow.Alerting
	internalID int64
}

// enabled reports whether alerts of type t are on, with the type's
// settings. STEP_FAILURE is on unless disabled, TCT_VIOLATION when the
// block has a tct; every other type when the block configures it.
func (c *config) enabled(t workflow.AlertType) (workflow.AlertingTypeConfig, bool) {
	tc, ok := c.a.TypeConfig(t)
	if ok && tc.Disabled {
		return tc, false
	}
	switch t {
	case workflow.AlertStepFailure:
		return tc, true
	case workflow.AlertTctViolation:
		return tc, c.a.Tct != nil
	case workflow.AlertSuccessWithin, workflow.AlertDependencyLate:
		return tc, ok && tc.DurationMinutes != nil
	}
	return tc, ok
}

// recipients are the type's recipients where it names some, else the
// block's.
func (c *config) recipients(tc workflow.AlertingTypeConfig) event.Recipients {
	r := event.Recipients{Emails: c.a.Emails, Pagerduties: c.a.Pagerduties}
	if len(tc.Emails) > 0 {
		r.Emails = tc.Emails
	}
	if len(tc.Pagerduties) > 0 {
		r.Pagerduties = tc.Pagerduties
	}
	sl := c.a.Slack
	if tc.Slack != nil {
		sl = tc.Slack
	}
	if sl != nil {
		r.Slack = &event.Slack{Users: sl.Users, Channels: sl.Channels, MentionUsers: sl.MentionUsers}
	}
	return r
}

func loadConfigs(ctx context.Context, tx pgx.Tx, ids []string) (map[string]*config, error) {
	out := map[string]*config{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, sqlConfigs, ids)
	if err != nil {
		return nil, fmt.Errorf("read alerting properties: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var raw []byte
		var internal int64
		if err := rows.Scan(&id, &raw, &internal); err != nil {
			return nil, fmt.Errorf("read alerting properties: %w", err)
		}
		a, err := workflow.ParseAlerting(raw)
		if err != nil || a == nil {
			continue // validated when stored; an older unreadable block alerts nothing
		}
		out[id] = &config{a: a, internalID: internal}
	}
	return out, rows.Err()
}

// runRow is what alerting reads of a run.
type runRow struct {
	uuid           string
	status         instance.WorkflowStatus
	group          int32
	params         []byte
	created        time.Time
	started, ended *time.Time
}

// readRun reads a run; ok is false when it no longer exists (deleted).
func readRun(ctx context.Context, tx pgx.Tx, workflowID string, instanceID, runID int64) (runRow, bool, error) {
	var r runRow
	err := tx.QueryRow(ctx, sqlRun, workflowID, instanceID, runID).Scan(&r.uuid, &r.status, &r.group, &r.params,
		&r.created, &r.started, &r.ended)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("read run %s/%d/%d: %w", workflowID, instanceID, runID, err)
	}
	return r, true, nil
}

// alert is one alert to raise.
type alert struct {
	key string
	cfg *config
	tc  workflow.AlertingTypeConfig
	ev  event.AlertEvent
	// cancel stops the run when the type's actions say so.
	cancel bool
}

// alertedRun identifies the run an alert is about.
type alertedRun struct {
	workflowID string
	instanceID int64
	runID      int64
	uuid       string
}

func (s *Service) link(r alertedRun) string {
	return fmt.Sprintf("%s/api/v3/workflows/%s/instances/%d/runs/%d", strings.TrimRight(s.cfg.LinkBase, "/"),
		url.PathEscape(r.workflowID), r.instanceID, r.runID)
}

// runAlert is an alert of type t about run r.
func (s *Service) runAlert(c *config, tc workflow.AlertingTypeConfig, t workflow.AlertType, r alertedRun, status, reason string, at time.Time) alert {
	return alert{key: r.uuid + "/" + string(t), cfg: c, tc: tc, ev: event.AlertEvent{
		AlertType: string(t), WorkflowID: r.workflowID, WorkflowInstanceID: r.instanceID, WorkflowRunID: r.runID,
		WorkflowUUID: r.uuid, Status: status, Reason: reason, Link: s.link(r), EventTime: at.UnixMilli(),
	}}
}

// raise writes an alert unless one of its key was raised before; with the
// cancel action it also asks the engine to stop the run.
func (s *Service) raise(ctx context.Context, tx pgx.Tx, a alert) error {
	a.ev.Recipients = a.cfg.recipients(a.tc)
	a.ev.Actions = a.tc.Actions
	if p := a.cfg.a.PagerdutyConfig; p != nil {
		a.ev.PagerdutySeverity = strings.ToLower(p.Severity)
	}
	if len(a.ev.Reason) > 2000 {
		a.ev.Reason = a.ev.Reason[:2000] + "…"
	}
	rec := event.NewRecord(&a.ev)
	tag, err := tx.Exec(ctx, sqlRaise, a.key, a.ev.WorkflowID, a.ev.AlertType, alertKind, rec.Payload)
	if err != nil {
		return fmt.Errorf("raise %s alert of %s: %w", a.ev.AlertType, a.ev.WorkflowID, err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	// A forwarder may publish the alert as soon as this commits: a crash
	// must not lose it then and raise it again under another event id.
	if err := event.Durable(ctx, tx); err != nil {
		return err
	}
	if !a.cancel || !a.tc.HasAction("cancel") {
		return nil
	}
	ref := run.Ref{WorkflowID: a.ev.WorkflowID, InstanceID: a.ev.WorkflowInstanceID, RunID: a.ev.WorkflowRunID}
	rr, ok, err := readRun(ctx, tx, ref.WorkflowID, ref.InstanceID, ref.RunID)
	if err != nil || !ok || rr.status.IsTerminal() {
		return err
	}
	_, err = queue.Enqueue(ctx, tx, queue.InstanceAction, rr.group, run.ActionMessage{Ref: ref, Group: rr.group,
		Action: run.ActionStop, Reason: "stopped by the cancel action of its " + a.ev.AlertType + " alert"})
	return err
}

// ConsumeOnce evaluates the next batch of events; it returns how many it
// evaluated.
func (s *Service) ConsumeOnce(ctx context.Context) (int, error) {
	return event.Consume(ctx, s.db, Reader, s.cfg.Batch, s.evaluate)
}

func (s *Service) evaluate(ctx context.Context, tx pgx.Tx, evs []event.Event) error {
	var ids []string
	seen := map[string]bool{}
	for _, e := range evs {
		t := e.Type()
		if t == event.Alert || t == event.WorkflowDeletionChange || seen[e.WorkflowID] ||
			instance.RootWorkflowID(e.WorkflowID) != e.WorkflowID {
			continue
		}
		seen[e.WorkflowID] = true
		ids = append(ids, e.WorkflowID)
	}
	cfgs, err := loadConfigs(ctx, tx, ids)
	if err != nil {
		return err
	}
	// Payloads only of the events there is something to evaluate for.
	var wanted []*event.Event
	for i := range evs {
		if cfgs[evs[i].WorkflowID] != nil && evs[i].Type() != event.Alert {
			wanted = append(wanted, &evs[i])
		}
	}
	if err := event.Payloads(ctx, tx, wanted); err != nil {
		return err
	}
	for _, e := range evs {
		if e.Type() == event.WorkflowDeletionChange {
			if _, err := tx.Exec(ctx, sqlWorkflowTimers, e.WorkflowID); err != nil {
				return fmt.Errorf("drop alert timers of %s: %w", e.WorkflowID, err)
			}
			continue
		}
		c := cfgs[e.WorkflowID]
		if c == nil || e.Payload == nil {
			continue
		}
		var err error
		switch e.Type() {
		case event.StepInstanceStatusChange:
			err = s.onStep(ctx, tx, c, e)
		case event.WorkflowInstanceStatusChange:
			err = s.onRun(ctx, tx, c, e)
		case event.WorkflowDefinitionChange, event.WorkflowVersionChange, event.WorkflowPropertiesChange:
			err = s.onDefinition(ctx, tx, c, e)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// onStep raises STEP_FAILURE for an attempt that failed for good and
// BREAKPOINT_HIT for one paused at a breakpoint, and arms DEPENDENCY_LATE
// for one that waits for signals.
func (s *Service) onStep(ctx context.Context, tx pgx.Tx, c *config, e event.Event) error {
	var ev event.StepInstanceStatusChangeEvent
	if err := json.Unmarshal(event.Wire(e), &ev); err != nil {
		return nil // not this build's shape: nothing to evaluate
	}
	r := alertedRun{workflowID: ev.WorkflowID, instanceID: ev.WorkflowInstanceID, runID: ev.WorkflowRunID, uuid: ev.WorkflowUUID}
	for _, rec := range ev.StatusChangeRecords {
		at := time.UnixMilli(rec.EventTime)
		switch rec.NewStatus {
		case instance.StepFatallyFailed, instance.StepInternallyFailed, instance.StepTimedOut:
			tc, on := c.enabled(workflow.AlertStepFailure)
			if !on {
				continue
			}
			reason := fmt.Sprintf("step %s (attempt %d) ended %s", ev.StepID, ev.StepAttemptID, rec.NewStatus)
			var status, msg string
			err := tx.QueryRow(ctx, sqlStep, ev.WorkflowID, ev.WorkflowInstanceID, ev.WorkflowRunID, ev.StepID, ev.StepAttemptID).Scan(&status, &msg)
			if err == nil && msg != "" {
				reason += ": " + msg
			}
			a := s.runAlert(c, tc, workflow.AlertStepFailure, r, string(rec.NewStatus), reason, at)
			a.ev.StepID, a.ev.StepAttemptID = ev.StepID, ev.StepAttemptID
			if err := s.raise(ctx, tx, a); err != nil {
				return err
			}
		case instance.StepPaused:
			tc, on := c.enabled(workflow.AlertBreakpointHit)
			if !on {
				continue
			}
			a := s.runAlert(c, tc, workflow.AlertBreakpointHit, r, string(rec.NewStatus),
				fmt.Sprintf("step %s (attempt %d) paused at a breakpoint", ev.StepID, ev.StepAttemptID), at)
			a.ev.StepID, a.ev.StepAttemptID = ev.StepID, ev.StepAttemptID
			if err := s.raise(ctx, tx, a); err != nil {
				return err
			}
		case instance.StepWaitingForSignals:
			tc, on := c.enabled(workflow.AlertDependencyLate)
			if !on {
				continue
			}
			d := time.Duration(*tc.DurationMinutes) * time.Minute
			details, _ := json.Marshal(map[string]any{"uuid": r.uuid, "threshold_minutes": *tc.DurationMinutes})
			if _, err := tx.Exec(ctx, sqlArm, ev.WorkflowID, ev.WorkflowInstanceID, ev.WorkflowRunID,
				string(workflow.AlertDependencyLate), ev.StepID, ev.StepAttemptID, at.Add(d), details); err != nil {
				return fmt.Errorf("arm DEPENDENCY_LATE of %s/%d: %w", ev.WorkflowID, ev.WorkflowInstanceID, err)
			}
		}
	}
	return nil
}

// timerDetails is what an armed timer remembers.
type timerDetails struct {
	UUID             string `json:"uuid"`
	Deadline         string `json:"deadline,omitempty"`
	ThresholdMinutes int64  `json:"threshold_minutes,omitempty"`
	Usual            bool   `json:"usual,omitempty"`
}

// onRun arms a run's TCT and LONG_RUNNING timers when it starts; when it
// ends, it raises TCT_VIOLATION for a run that ended after its TCT (when
// the timer could not fire first), RUN_SUCCESS, and re-arms SUCCESS_WITHIN.
func (s *Service) onRun(ctx context.Context, tx pgx.Tx, c *config, e event.Event) error {
	var ev event.WorkflowInstanceStatusChangeEvent
	if err := json.Unmarshal(event.Wire(e), &ev); err != nil {
		return nil
	}
	r := alertedRun{workflowID: ev.WorkflowID, instanceID: ev.WorkflowInstanceID, runID: ev.WorkflowRunID, uuid: ev.WorkflowUUID}
	at := time.UnixMilli(ev.EventTime)
	switch {
	case ev.NewStatus == instance.WorkflowInProgress:
		return s.armRun(ctx, tx, c, r, at)
	case ev.NewStatus.IsTerminal():
		rows, err := tx.Query(ctx, sqlRunTimers, r.workflowID, r.instanceID, r.runID)
		if err != nil {
			return fmt.Errorf("drop alert timers of %s/%d/%d: %w", r.workflowID, r.instanceID, r.runID, err)
		}
		type timer struct {
			t   string
			due time.Time
			d   []byte
		}
		timers, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (timer, error) {
			var t timer
			err := row.Scan(&t.t, &t.due, &t.d)
			return t, err
		})
		if err != nil {
			return fmt.Errorf("drop alert timers of %s/%d/%d: %w", r.workflowID, r.instanceID, r.runID, err)
		}
		for _, t := range timers {
			if t.t != string(workflow.AlertTctViolation) || !t.due.Before(at) {
				continue
			}
			if tc, on := c.enabled(workflow.AlertTctViolation); on {
				a := s.runAlert(c, tc, workflow.AlertTctViolation, r, string(ev.NewStatus),
					fmt.Sprintf("run ended %s at %s, after its target completion time %s", ev.NewStatus,
						at.UTC().Format(time.RFC3339), t.due.UTC().Format(time.RFC3339)), at)
				if err := s.raise(ctx, tx, a); err != nil {
					return err
				}
			}
		}
		if ev.NewStatus != instance.WorkflowSucceeded {
			return nil
		}
		if tc, on := c.enabled(workflow.AlertRunSuccess); on {
			if err := s.raise(ctx, tx, s.runAlert(c, tc, workflow.AlertRunSuccess, r, string(ev.NewStatus), "run succeeded", at)); err != nil {
				return err
			}
		}
		if tc, on := c.enabled(workflow.AlertSuccessWithin); on {
			return s.armSuccessWithin(ctx, tx, r.workflowID, *tc.DurationMinutes, at, true)
		}
	}
	return nil
}

// armRun arms a starting run's TCT and LONG_RUNNING timers.
func (s *Service) armRun(ctx context.Context, tx pgx.Tx, c *config, r alertedRun, at time.Time) error {
	_, tctOn := c.enabled(workflow.AlertTctViolation)
	lr, lrOn := c.enabled(workflow.AlertLongRunning)
	if !tctOn && !lrOn {
		return nil
	}
	rr, ok, err := readRun(ctx, tx, r.workflowID, r.instanceID, r.runID)
	if err != nil || !ok {
		return err
	}
	if tctOn {
		var vals params.Values
		if len(rr.params) > 2 {
			_ = json.Unmarshal(rr.params, &vals)
		}
		due, err := Deadline(c.a.Tct, vals, rr.created)
		if err == nil {
			d, _ := json.Marshal(timerDetails{UUID: r.uuid, Deadline: due.UTC().Format(time.RFC3339)})
			if _, err := tx.Exec(ctx, sqlArm, r.workflowID, r.instanceID, r.runID, string(workflow.AlertTctViolation), "", 0, due, d); err != nil {
				return fmt.Errorf("arm TCT_VIOLATION of %s/%d: %w", r.workflowID, r.instanceID, err)
			}
		}
	}
	if lrOn {
		start := at
		if rr.started != nil {
			start = *rr.started
		}
		threshold, usual := time.Duration(0), false
		if lr.DurationMinutes != nil {
			threshold = time.Duration(*lr.DurationMinutes) * time.Minute
		} else {
			var median float64
			var n int64
			if err := tx.QueryRow(ctx, sqlUsualDuration, r.workflowID).Scan(&median, &n); err != nil {
				return fmt.Errorf("usual duration of %s: %w", r.workflowID, err)
			}
			if n < 3 {
				return nil // no usual duration yet
			}
			threshold, usual = max(2*time.Duration(median*float64(time.Second)), time.Minute), true
		}
		d, _ := json.Marshal(timerDetails{UUID: r.uuid, ThresholdMinutes: int64(threshold / time.Minute), Usual: usual})
		if _, err := tx.Exec(ctx, sqlArm, r.workflowID, r.instanceID, r.runID, string(workflow.AlertLongRunning), "", 0,
			start.Add(threshold), d); err != nil {
			return fmt.Errorf("arm LONG_RUNNING of %s/%d: %w", r.workflowID, r.instanceID, err)
		}
	}
	return nil
}

// armSuccessWithin arms (again, when rearm) a workflow's SUCCESS_WITHIN
// timer: due when no run succeeds within minutes after from.
func (s *Service) armSuccessWithin(ctx context.Context, tx pgx.Tx, workflowID string, minutes int64, from time.Time, rearm bool) error {
	due := from.Add(time.Duration(minutes) * time.Minute)
	d, _ := json.Marshal(timerDetails{ThresholdMinutes: minutes})
	var err error
	if rearm {
		_, err = tx.Exec(ctx, sqlRearm, workflowID, 0, 0, string(workflow.AlertSuccessWithin), due, d)
	} else {
		_, err = tx.Exec(ctx, sqlArm, workflowID, 0, 0, string(workflow.AlertSuccessWithin), "", 0, due, d)
	}
	if err != nil {
		return fmt.Errorf("arm SUCCESS_WITHIN of %s: %w", workflowID, err)
	}
	return nil
}

// onDefinition raises DEFINITION_CHANGE and arms SUCCESS_WITHIN for a
// workflow that has no timer yet.
func (s *Service) onDefinition(ctx context.Context, tx pgx.Tx, c *config, e event.Event) error {
	var ev event.WorkflowChangeEvent
	if err := json.Unmarshal(event.Wire(e), &ev); err != nil {
		return nil
	}
	at := time.UnixMilli(ev.EventTime)
	if tc, on := c.enabled(workflow.AlertDefinitionChange); on {
		what := "properties snapshot"
		n := ev.SnapshotID
		if ev.VersionID != nil {
			what, n = "version", ev.VersionID
		}
		reason := fmt.Sprintf("workflow %s changed by %s", ev.WorkflowID, ev.Author)
		if n != nil {
			reason = fmt.Sprintf("%s %d of workflow %s created by %s", what, *n, ev.WorkflowID, ev.Author)
		}
		a := alert{key: "event:" + e.EventID() + "/" + string(workflow.AlertDefinitionChange), cfg: c, tc: tc,
			ev: event.AlertEvent{AlertType: string(workflow.AlertDefinitionChange), WorkflowID: ev.WorkflowID,
				Status: string(ev.Type), Reason: reason, EventTime: at.UnixMilli()}}
		if err := s.raise(ctx, tx, a); err != nil {
			return err
		}
	}
	if tc, on := c.enabled(workflow.AlertSuccessWithin); on {
		return s.armSuccessWithin(ctx, tx, ev.WorkflowID, *tc.DurationMinutes, at, false)
	}
	return nil
}

// FireDue fires the timers that are due; it returns how many it took.
func (s *Service) FireDue(ctx context.Context) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlDue, timerBatch)
		if err != nil {
			return fmt.Errorf("read due alert timers: %w", err)
		}
		type timer struct {
			workflowID, alertType, stepID string
			instanceID, runID, attemptID  int64
			due                           time.Time
			details                       timerDetails
		}
		timers, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (timer, error) {
			var t timer
			var d []byte
			err := row.Scan(&t.workflowID, &t.instanceID, &t.runID, &t.alertType, &t.stepID, &t.attemptID, &t.due, &d)
			_ = json.Unmarshal(d, &t.details)
			return t, err
		})
		if err != nil {
			return fmt.Errorf("read due alert timers: %w", err)
		}
		n = len(timers)
		ids := make([]string, 0, len(timers))
		for _, t := range timers {
			ids = append(ids, t.workflowID)
		}
		cfgs, err := loadConfigs(ctx, tx, ids)
		if err != nil {
			return err
		}
		for _, t := range timers {
			if _, err := tx.Exec(ctx, sqlDeleteTimer, t.workflowID, t.instanceID, t.runID, t.alertType, t.stepID, t.attemptID); err != nil {
				return fmt.Errorf("drop alert timer: %w", err)
			}
			c := cfgs[t.workflowID]
			if c == nil {
				continue // alerting turned off since
			}
			tc, on := c.enabled(workflow.AlertType(t.alertType))
			if !on {
				continue
			}
			r := alertedRun{workflowID: t.workflowID, instanceID: t.instanceID, runID: t.runID, uuid: t.details.UUID}
			if err := s.fire(ctx, tx, c, tc, workflow.AlertType(t.alertType), r, t.stepID, t.attemptID, t.due, t.details); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// fire raises a due timer's alert if its condition still holds.
func (s *Service) fire(ctx context.Context, tx pgx.Tx, c *config, tc workflow.AlertingTypeConfig, t workflow.AlertType,
	r alertedRun, stepID string, attempt int64, due time.Time, d timerDetails) error {
	now := time.Now()
	if t == workflow.AlertSuccessWithin {
		since := due.Add(-time.Duration(d.ThresholdMinutes) * time.Minute)
		var ok bool
		if err := tx.QueryRow(ctx, sqlSucceededSince, r.workflowID, since).Scan(&ok); err != nil {
			return fmt.Errorf("successes of %s: %w", r.workflowID, err)
		}
		if ok {
			return nil
		}
		return s.raise(ctx, tx, alert{key: fmt.Sprintf("%d/%s/%d", c.internalID, t, due.Unix()), cfg: c, tc: tc,
			ev: event.AlertEvent{AlertType: string(t), WorkflowID: r.workflowID, EventTime: now.UnixMilli(),
				Reason: fmt.Sprintf("no run of workflow %s succeeded within %d minutes (since %s)", r.workflowID,
					d.ThresholdMinutes, since.UTC().Format(time.RFC3339))}})
	}
	rr, ok, err := readRun(ctx, tx, r.workflowID, r.instanceID, r.runID)
	if err != nil || !ok {
		return err
	}
	r.uuid = rr.uuid
	status, started, ended := rr.status, rr.started, rr.ended
	live := !status.IsTerminal()
	switch t {
	case workflow.AlertTctViolation:
		if !live && (ended == nil || !ended.After(due)) {
			return nil
		}
		reason := fmt.Sprintf("run has not completed by its target completion time %s (it is %s)", due.UTC().Format(time.RFC3339), status)
		if !live {
			reason = fmt.Sprintf("run ended %s at %s, after its target completion time %s", status,
				ended.UTC().Format(time.RFC3339), due.UTC().Format(time.RFC3339))
		}
		a := s.runAlert(c, tc, t, r, string(status), reason, now)
		a.cancel = live
		return s.raise(ctx, tx, a)
	case workflow.AlertLongRunning:
		if !live {
			return nil
		}
		start := rr.created
		if started != nil {
			start = *started
		}
		why := fmt.Sprintf("its threshold of %d minutes", d.ThresholdMinutes)
		if d.Usual {
			why = fmt.Sprintf("twice its usual duration (%d minutes)", d.ThresholdMinutes)
		}
		a := s.runAlert(c, tc, t, r, string(status),
			fmt.Sprintf("run has been running for %s, longer than %s", now.Sub(start).Round(time.Second), why), now)
		a.cancel = true
		return s.raise(ctx, tx, a)
	case workflow.AlertDependencyLate:
		var stepStatus, msg string
		err := tx.QueryRow(ctx, sqlStep, r.workflowID, r.instanceID, r.runID, stepID, attempt).Scan(&stepStatus, &msg)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && stepStatus != string(instance.StepWaitingForSignals)) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read step %s of %s/%d: %w", stepID, r.workflowID, r.instanceID, err)
		}
		a := s.runAlert(c, tc, t, r, stepStatus, fmt.Sprintf("step %s (attempt %d) has waited for its signals for more than %d minutes",
			stepID, attempt, d.ThresholdMinutes), now)
		a.ev.StepID, a.ev.StepAttemptID = stepID, attempt
		return s.raise(ctx, tx, a)
	}
	return nil
}
