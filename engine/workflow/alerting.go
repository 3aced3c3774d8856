package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Alerting is the alerting block of a workflow's properties, as Maestro's
// DefaultAlerting: who to alert (emails, PagerDuty services, Slack), the
// target completion time (tct) and per-alert-type settings. Properties
// keeps the block as it was written; ParseAlerting reads it. See
// docs/events.md for what raises each alert.
type Alerting struct {
	Emails             []string                         `json:"emails,omitempty"`
	Pagerduties        []string                         `json:"pagerduties,omitempty"`
	Slack              *AlertingSlack                   `json:"slack,omitempty"`
	BypassDigestConfig *BypassDigestConfig              `json:"bypass_digest_config,omitempty"`
	TypeConfigs        map[AlertType]AlertingTypeConfig `json:"type_configs,omitempty"`
	PagerdutyConfig    *PagerdutyConfig                 `json:"pagerduty_config,omitempty"`
	Tct                *Tct                             `json:"tct,omitempty"`
}

// AlertingSlack is the Slack part of the alerting block.
type AlertingSlack struct {
	Users        []string `json:"users,omitempty"`
	Channels     []string `json:"channels,omitempty"`
	MentionUsers []string `json:"mention_users,omitempty"`
}

// BypassDigestConfig names what bypasses an alert digest.
type BypassDigestConfig struct {
	Workflow bool     `json:"workflow,omitempty"`
	Steps    []string `json:"steps,omitempty"`
}

// PagerdutyConfig is the PagerDuty severity and paging policy.
type PagerdutyConfig struct {
	Severity   string `json:"severity,omitempty"`
	AlwaysPage *bool  `json:"always_page,omitempty"`
}

// AlertingTypeConfig overrides the alerting block for one alert type.
type AlertingTypeConfig struct {
	Emails      []string       `json:"emails,omitempty"`
	Pagerduties []string       `json:"pagerduties,omitempty"`
	Slack       *AlertingSlack `json:"slack,omitempty"`
	// Actions are email, page, slack and cancel (cancel stops the run).
	Actions     []string `json:"actions,omitempty"`
	Disabled    bool     `json:"disabled,omitempty"`
	Granularity string   `json:"granularity,omitempty"`
	// DurationMinutes is the threshold of LONG_RUNNING, SUCCESS_WITHIN and
	// DEPENDENCY_LATE.
	DurationMinutes *int64 `json:"duration_minutes,omitempty"`
}

// Tct is a target completion time: exactly one of CompletedByHour (an hour
// of the run's date, in Tz), DurationMinutes (after the run's time) and
// CompletedByTs (epoch milliseconds).
type Tct struct {
	CompletedByHour *int64 `json:"completed_by_hour,omitempty"`
	DurationMinutes *int64 `json:"duration_minutes,omitempty"`
	CompletedByTs   *int64 `json:"completed_by_ts,omitempty"`
	// Tz is the time zone of CompletedByHour; default the workflow's first
	// time trigger's, else UTC.
	Tz string `json:"tz,omitempty"`
}

// AlertType is a kind of alert, as Maestro's AlertType.
type AlertType string

// Alert types.
const (
	AlertStepFailure      AlertType = "STEP_FAILURE"
	AlertTctViolation     AlertType = "TCT_VIOLATION"
	AlertLongRunning      AlertType = "LONG_RUNNING"
	AlertDependencyLate   AlertType = "DEPENDENCY_LATE"
	AlertBreakpointHit    AlertType = "BREAKPOINT_HIT"
	AlertDefinitionChange AlertType = "DEFINITION_CHANGE"
	AlertRunSuccess       AlertType = "RUN_SUCCESS"
	AlertSuccessWithin    AlertType = "SUCCESS_WITHIN"
)

// AlertTypes lists every alert type.
func AlertTypes() []AlertType {
	return []AlertType{AlertStepFailure, AlertTctViolation, AlertLongRunning, AlertDependencyLate,
		AlertBreakpointHit, AlertDefinitionChange, AlertRunSuccess, AlertSuccessWithin}
}

// Alert actions and granularities, lower-cased.
var (
	alertActions       = []string{"email", "page", "slack", "cancel"}
	alertGranularities = []string{"workflow", "step", "all"}
	pagerdutySeverity  = []string{"critical", "error", "warning", "info"}
)

// MaxTctHour bounds tct.completed_by_hour: up to the end of the day after
// the run's date.
const MaxTctHour = 48

// ParseAlerting reads an alerting block; nil or an empty raw is no block.
func ParseAlerting(raw json.RawMessage) (*Alerting, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var a Alerting
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// TypeConfig returns the settings of an alert type, ok false when the
// block has none.
func (a *Alerting) TypeConfig(t AlertType) (AlertingTypeConfig, bool) {
	c, ok := a.TypeConfigs[t]
	return c, ok
}

// HasAction reports whether the type's settings list an action.
func (c AlertingTypeConfig) HasAction(action string) bool {
	return slices.ContainsFunc(c.Actions, func(a string) bool { return strings.EqualFold(a, action) })
}

// alerting checks an alerting block: the shape of every field Maestro
// defines, the tct (exactly one time field, a known time zone), and the
// alert types, actions, granularities and severities by name. Fields
// Maestro does not define are left alone (an alerting implementation of
// one's own may add some).
func (s *validation) alerting(raw json.RawMessage, at *loc) {
	if len(raw) == 0 {
		return
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		s.report(at, "expected an object")
		return
	}
	a, err := ParseAlerting(raw)
	if err != nil {
		s.reportf(at, "invalid alerting block: %s", jsonProblem(err))
		return
	}
	if a.Tct != nil {
		s.tct(a.Tct, at.child("tct"))
	}
	if p := a.PagerdutyConfig; p != nil && p.Severity != "" && !slices.Contains(pagerdutySeverity, strings.ToLower(p.Severity)) {
		s.reportf(at.child("pagerduty_config").child("severity"), "unknown severity %q; expected one of %s",
			p.Severity, strings.Join(pagerdutySeverity, ", "))
	}
	tp := at.child("type_configs")
	keys := make([]string, 0, len(a.TypeConfigs))
	for t := range a.TypeConfigs {
		keys = append(keys, string(t))
	}
	slices.Sort(keys)
	for _, k := range keys {
		c := a.TypeConfigs[AlertType(k)]
		kp := tp.child(k)
		if !slices.Contains(AlertTypes(), AlertType(k)) {
			s.reportf(kp, "unknown alert type %q; expected one of %s", k, joinAlertTypes())
			continue
		}
		for i, act := range c.Actions {
			if !slices.Contains(alertActions, strings.ToLower(act)) {
				s.reportf(kp.child("actions").at(i), "unknown action %q; expected one of %s", act, strings.Join(alertActions, ", "))
			}
		}
		if c.Granularity != "" && !slices.Contains(alertGranularities, strings.ToLower(c.Granularity)) {
			s.reportf(kp.child("granularity"), "unknown granularity %q; expected WORKFLOW, STEP or ALL", c.Granularity)
		}
		if d := c.DurationMinutes; d != nil && (*d <= 0 || *d > MaxAlertMinutes) {
			s.reportf(kp.child("duration_minutes"), "must be between 1 and %d, got %d", MaxAlertMinutes, *d)
		}
		if (AlertType(k) == AlertSuccessWithin || AlertType(k) == AlertDependencyLate) && c.DurationMinutes == nil && !c.Disabled {
			s.reportf(kp.child("duration_minutes"), "%s needs duration_minutes", k)
		}
	}
}

func (s *validation) tct(t *Tct, at *loc) {
	set := 0
	for _, v := range []*int64{t.CompletedByHour, t.DurationMinutes, t.CompletedByTs} {
		if v != nil {
			set++
		}
	}
	if set != 1 {
		s.report(at, "one and only one of completed_by_hour, duration_minutes and completed_by_ts has to be set")
	}
	if h := t.CompletedByHour; h != nil && (*h < 1 || *h > MaxTctHour) {
		s.reportf(at.child("completed_by_hour"), "must be between 1 and %d, got %d", MaxTctHour, *h)
	}
	if d := t.DurationMinutes; d != nil && (*d <= 0 || *d > MaxAlertMinutes) {
		s.reportf(at.child("duration_minutes"), "must be between 1 and %d, got %d", MaxAlertMinutes, *d)
	}
	if ts := t.CompletedByTs; ts != nil && (*ts <= 0 || *ts > MaxEpochMillis) {
		s.reportf(at.child("completed_by_ts"), "must be epoch milliseconds from 1 to %d, got %d", int64(MaxEpochMillis), *ts)
	}
	if t.Tz != "" {
		if _, err := time.LoadLocation(t.Tz); err != nil {
			s.reportf(at.child("tz"), "unknown time zone %q", t.Tz)
		}
	}
}

func joinAlertTypes() string {
	names := make([]string, 0, 8)
	for _, t := range AlertTypes() {
		names = append(names, string(t))
	}
	return strings.Join(names, ", ")
}

// jsonProblem words a decoding error of encoding/json for a user.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s: expected %s, got %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}
