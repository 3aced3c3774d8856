package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/maestro-aws/maestro/engine/instance"
)

// This file is the one place that knows the API's response shapes. It
// reads both the shapes of this implementation's first API (RFC 3339 times,
// wrapped answers) and Maestro's (epoch-millisecond times, flat answers,
// PaginationResult), so the command line works against either.

// Time is a time the API answers as epoch milliseconds (Maestro) or as an
// RFC 3339 string.
type Time struct{ time.Time }

// UnmarshalJSON reads a number of milliseconds or an RFC 3339 string.
func (t *Time) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			return nil
		}
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fmt.Errorf("time %q: %w", s, err)
		}
		t.Time = v
		return nil
	}
	ms, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("time %s: %w", b, err)
	}
	t.Time = time.UnixMilli(int64(ms))
	return nil
}

// MarshalJSON writes epoch milliseconds, as Maestro does.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, t.UnixMilli(), 10), nil
}

// TimelineEvent is one event of a run's or a step's timeline.
type TimelineEvent struct {
	Timestamp Time     `json:"timestamp"`
	Type      string   `json:"type"`
	Level     string   `json:"level,omitempty"`
	Status    string   `json:"status,omitempty"`
	Action    string   `json:"action,omitempty"`
	Author    string   `json:"author,omitempty"`
	Message   string   `json:"message,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Errors    []string `json:"errors,omitempty"`
}

// Text is the event as one line of prose.
func (e TimelineEvent) Text() string {
	s := e.Message
	switch {
	case e.Type == "STATUS" && s == "":
		s = "status changed to " + e.Status
	case e.Action != "" && s == "":
		s = e.Action + " by " + e.Author
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	for _, x := range e.Errors {
		s += "; " + x
	}
	return s
}

// Version is one version of a workflow definition.
type Version struct {
	WorkflowID    string
	VersionID     int64
	IsActive      bool
	Created       *bool
	CreatedBy     string
	CreateTime    Time
	ActiveVersion *int64
	LatestVersion int64
	// Workflow is the definition's workflow object (id, steps, ...).
	Workflow json.RawMessage
	// Raw is the answer as the API sent it.
	Raw json.RawMessage
}

// decodeVersion reads a version, a push's answer or a Maestro
// WorkflowDefinition.
func decodeVersion(raw json.RawMessage) (*Version, error) {
	var w struct {
		WorkflowDefinition json.RawMessage `json:"workflow_definition"`
		Created            *bool           `json:"created"`
		WorkflowID         string          `json:"workflow_id"`
		VersionID          int64           `json:"workflow_version_id"`
		IsActive           bool            `json:"is_active"`
		ActiveVersion      *int64          `json:"active_version_id"`
		LatestVersion      int64           `json:"latest_version_id"`
		CreatedBy          string          `json:"created_by"`
		CreateTime         Time            `json:"create_time"`
		Definition         json.RawMessage `json:"definition"`
		Workflow           json.RawMessage `json:"workflow"`
		Metadata           *struct {
			WorkflowID    string `json:"workflow_id"`
			VersionID     int64  `json:"workflow_version_id"`
			CreateTime    Time   `json:"create_time"`
			VersionAuthor string `json:"version_author"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode workflow version: %w", err)
	}
	v := &Version{Raw: raw, Created: w.Created, ActiveVersion: w.ActiveVersion, LatestVersion: w.LatestVersion}
	if len(w.WorkflowDefinition) > 0 {
		inner, err := decodeVersion(w.WorkflowDefinition)
		if err != nil {
			return nil, err
		}
		inner.Raw, inner.Created, inner.ActiveVersion, inner.LatestVersion = raw, w.Created, w.ActiveVersion, w.LatestVersion
		return inner, nil
	}
	v.WorkflowID, v.VersionID, v.IsActive, v.CreatedBy, v.CreateTime = w.WorkflowID, w.VersionID, w.IsActive, w.CreatedBy, w.CreateTime
	v.Workflow = w.Definition
	if len(w.Workflow) > 0 {
		v.Workflow = w.Workflow
	}
	if m := w.Metadata; m != nil {
		v.WorkflowID, v.VersionID, v.CreateTime, v.CreatedBy = m.WorkflowID, m.VersionID, m.CreateTime, m.VersionAuthor
	}
	return v, nil
}

// WorkflowSummary is one workflow of a listing.
type WorkflowSummary struct {
	WorkflowID       string `json:"workflow_id"`
	Name             string `json:"name"`
	Description      string `json:"description"`
	Owner            string `json:"owner"`
	IsActive         bool   `json:"is_active"`
	ActiveVersionID  *int64 `json:"active_version_id"`
	LatestVersionID  int64  `json:"latest_version_id"`
	LatestInstanceID int64  `json:"latest_instance_id"`
	ModifyTime       Time   `json:"modify_time"`
}

// WorkflowPage is a page of workflows.
type WorkflowPage struct {
	Items []WorkflowSummary `json:"items"`
	Next  string            `json:"next_cursor"`
	Raw   json.RawMessage   `json:"-"`
}

// Overview is a workflow's overview.
type Overview struct {
	WorkflowID       string `json:"workflow_id"`
	ActiveVersionID  *int64 `json:"active_version_id"`
	LatestVersionID  int64  `json:"latest_version_id"`
	DefaultVersionID int64  `json:"default_version_id"`
	Owner            string `json:"owner"`
	CreatedBy        string `json:"created_by"`
	CreateTime       Time   `json:"create_time"`
	ModifyTime       Time   `json:"modify_time"`
	// LatestInstanceID is the newest instance's id (0: never run).
	LatestInstanceID int64 `json:"latest_instance_id"`
	// StatusCounts counts the instances by status.
	StatusCounts map[string]int64 `json:"-"`
	Raw          json.RawMessage  `json:"-"`
}

func decodeOverview(raw json.RawMessage) (*Overview, error) {
	var w struct {
		Overview
		Instances *struct {
			LatestInstanceID int64            `json:"latest_instance_id"`
			StatusCounts     map[string]int64 `json:"status_counts"`
		} `json:"instances"`
		Nonterminal map[string]int64 `json:"nonterminal_instances"`
		Failed      *int64           `json:"failed_instances"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode workflow overview: %w", err)
	}
	o := w.Overview
	o.Raw = raw
	o.StatusCounts = map[string]int64{}
	if w.Instances != nil {
		if o.LatestInstanceID == 0 {
			o.LatestInstanceID = w.Instances.LatestInstanceID
		}
		for k, n := range w.Instances.StatusCounts {
			o.StatusCounts[k] = n
		}
	}
	for k, n := range w.Nonterminal {
		o.StatusCounts[k] += n
	}
	if w.Failed != nil && *w.Failed > 0 {
		o.StatusCounts["FAILED"] += *w.Failed
	}
	return &o, nil
}

// Run is one run of a workflow instance.
type Run struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
	VersionID  int64
	UUID       string
	Status     string
	CreateTime Time
	StartTime  Time
	EndTime    Time
	Initiator  json.RawMessage
	RunParams  json.RawMessage
	Params     json.RawMessage
	Timeline   []TimelineEvent
	// StepCounts counts the run's steps by status; TotalSteps is their number.
	StepCounts map[string]int64
	TotalSteps int64
	// Rollup counts leaf steps across nested runs (foreach, subworkflow).
	Rollup *Rollup
	// Workflow is the definition the run executes (runtime_workflow).
	Workflow json.RawMessage
	Raw      json.RawMessage
}

// Rollup counts leaf steps by status across a run's nested runs.
type Rollup struct {
	Total  int64
	Counts map[string]int64
}

// Done is the number of leaves in a terminal status.
func (r *Rollup) Done() int64 {
	var n int64
	for st, c := range r.Counts {
		if TerminalStep(st) {
			n += c
		}
	}
	return n
}

type runWire struct {
	WorkflowID      string            `json:"workflow_id"`
	InstanceID      int64             `json:"workflow_instance_id"`
	RunID           int64             `json:"workflow_run_id"`
	VersionID       int64             `json:"workflow_version_id"`
	UUID            string            `json:"workflow_uuid"`
	Status          string            `json:"status"`
	CreateTime      Time              `json:"create_time"`
	StartTime       Time              `json:"start_time"`
	EndTime         Time              `json:"end_time"`
	Initiator       json.RawMessage   `json:"initiator"`
	RunParams       json.RawMessage   `json:"run_params"`
	Params          json.RawMessage   `json:"params"`
	Timeline        json.RawMessage   `json:"timeline"`
	RuntimeWorkflow json.RawMessage   `json:"runtime_workflow"`
	RuntimeOverview *runtimeOverviewW `json:"runtime_overview"`
}

type runtimeOverviewW struct {
	TotalStepCount int64                      `json:"total_step_count"`
	StepOverview   map[string]json.RawMessage `json:"step_overview"`
	RollupOverview *struct {
		TotalLeafCount int64 `json:"total_leaf_count"`
		Overview       map[string]struct {
			Count int64 `json:"cnt"`
		} `json:"overview"`
	} `json:"rollup_overview"`
}

func decodeRun(raw json.RawMessage) (*Run, error) {
	var w runWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode workflow run: %w", err)
	}
	r := &Run{WorkflowID: w.WorkflowID, InstanceID: w.InstanceID, RunID: w.RunID, VersionID: w.VersionID, UUID: w.UUID,
		Status: w.Status, CreateTime: w.CreateTime, StartTime: w.StartTime, EndTime: w.EndTime, Initiator: w.Initiator,
		RunParams: w.RunParams, Params: w.Params, Workflow: w.RuntimeWorkflow, Raw: raw, StepCounts: map[string]int64{}}
	r.Timeline = decodeTimeline(w.Timeline)
	if ov := w.RuntimeOverview; ov != nil {
		r.TotalSteps = ov.TotalStepCount
		for st, v := range ov.StepOverview {
			r.StepCounts[st] = count(v)
		}
		if ro := ov.RollupOverview; ro != nil {
			r.Rollup = &Rollup{Total: ro.TotalLeafCount, Counts: map[string]int64{}}
			for st, c := range ro.Overview {
				r.Rollup.Counts[st] = c.Count
			}
		}
	}
	return r, nil
}

// count reads a status count: a number, or Maestro's {"cnt": n, ...}.
func count(v json.RawMessage) int64 {
	var n int64
	if json.Unmarshal(v, &n) == nil {
		return n
	}
	var c struct {
		Count int64 `json:"cnt"`
	}
	_ = json.Unmarshal(v, &c) // anything else counts 0
	return c.Count
}

// decodeTimeline reads a timeline: an array of events, or Maestro's
// {"timeline_events": [...]}.
func decodeTimeline(raw json.RawMessage) []TimelineEvent {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var evs []TimelineEvent
	if raw[0] == '{' {
		var w struct {
			Events []TimelineEvent `json:"timeline_events"`
		}
		_ = json.Unmarshal(raw, &w) // a timeline we cannot read shows empty
		return w.Events
	}
	_ = json.Unmarshal(raw, &evs)
	return evs
}

// Step is the latest attempt of one step of a run.
type Step struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
	StepID     string
	AttemptID  int64
	Type       string
	Status     string
	StartTime  Time
	EndTime    Time
	Message    string
	Params     json.RawMessage
	Outputs    json.RawMessage
	Retry      json.RawMessage
	Timeline   []TimelineEvent
	Raw        json.RawMessage
}

type stepWire struct {
	WorkflowID   string          `json:"workflow_id"`
	InstanceID   int64           `json:"workflow_instance_id"`
	RunID        int64           `json:"workflow_run_id"`
	StepID       string          `json:"step_id"`
	AttemptID    int64           `json:"step_attempt_id"`
	Type         string          `json:"step_type"`
	Status       string          `json:"status"`
	StartTime    Time            `json:"start_time"`
	EndTime      Time            `json:"end_time"`
	Params       json.RawMessage `json:"params"`
	Outputs      json.RawMessage `json:"outputs"`
	Retry        json.RawMessage `json:"step_retry"`
	Timeline     json.RawMessage `json:"timeline"`
	RuntimeState json.RawMessage `json:"runtime_state"`
}

func decodeStep(raw json.RawMessage) (*Step, error) {
	var w stepWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode step: %w", err)
	}
	s := &Step{WorkflowID: w.WorkflowID, InstanceID: w.InstanceID, RunID: w.RunID, StepID: w.StepID, AttemptID: w.AttemptID,
		Type: w.Type, Status: w.Status, StartTime: w.StartTime, EndTime: w.EndTime, Params: w.Params, Outputs: w.Outputs,
		Retry: w.Retry, Timeline: decodeTimeline(w.Timeline), Raw: raw}
	// Maestro keeps the status and its times in runtime_state.
	var rs struct {
		Status    string `json:"status"`
		StartTime Time   `json:"start_time"`
		EndTime   Time   `json:"end_time"`
		Message   string `json:"message"`
	}
	if json.Unmarshal(w.RuntimeState, &rs) == nil {
		if rs.Status != "" {
			s.Status = rs.Status
		}
		if !rs.StartTime.IsZero() {
			s.StartTime = rs.StartTime
		}
		if !rs.EndTime.IsZero() {
			s.EndTime = rs.EndTime
		}
		s.Message = rs.Message
	}
	return s, nil
}

// decodeSteps reads a run's steps: a JSON array (Maestro) or {"steps": [...]}.
func decodeSteps(raw json.RawMessage) ([]*Step, error) { return decodeList(raw, "steps", decodeStep) }

// decodeList reads a listing's elements (listItems) with decode.
func decodeList[T any](raw json.RawMessage, key string, decode func(json.RawMessage) (T, error)) ([]T, error) {
	items, err := listItems(raw, key)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	out := make([]T, 0, len(items))
	for _, it := range items {
		v, err := decode(it)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// listItems reads the elements of a listing: a bare array, Maestro's
// PaginationResult {"elements": [...]}, or {key: [...]}.
func listItems(raw json.RawMessage, key string) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	var items []json.RawMessage
	if len(raw) > 0 && raw[0] == '[' {
		err := json.Unmarshal(raw, &items)
		return items, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	for _, k := range []string{key, "elements", "items"} {
		if v, ok := obj[k]; ok {
			err := json.Unmarshal(v, &items)
			return items, err
		}
	}
	return nil, nil
}

// StartResult is the answer to a start or a restart.
type StartResult struct {
	WorkflowID string
	VersionID  int64
	InstanceID int64
	RunID      int64
	// Status is CREATED, DUPLICATED or STOPPED (dropped by FIRST_ONLY).
	Status string
	Raw    json.RawMessage
}

// decodeStart reads a start answer: Maestro's flat
// WorkflowStartResponse, or {status, workflow_instance}.
func decodeStart(raw json.RawMessage) (*StartResult, error) {
	var w struct {
		Status           string          `json:"status"`
		WorkflowInstance json.RawMessage `json:"workflow_instance"`
		WorkflowID       string          `json:"workflow_id"`
		VersionID        int64           `json:"workflow_version_id"`
		InstanceID       int64           `json:"workflow_instance_id"`
		RunID            int64           `json:"workflow_run_id"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode start answer: %w", err)
	}
	res := &StartResult{WorkflowID: w.WorkflowID, VersionID: w.VersionID, InstanceID: w.InstanceID, RunID: w.RunID,
		Status: w.Status, Raw: raw}
	if len(w.WorkflowInstance) > 0 && string(w.WorkflowInstance) != "null" {
		r, err := decodeRun(w.WorkflowInstance)
		if err != nil {
			return nil, err
		}
		res.WorkflowID, res.VersionID, res.InstanceID, res.RunID = r.WorkflowID, r.VersionID, r.InstanceID, r.RunID
	}
	return res, nil
}

// decodeRuns reads a listing of instances.
func decodeRuns(raw json.RawMessage) ([]*Run, error) { return decodeList(raw, "items", decodeRun) }

// decodeSignal reads a signal announcement's answer: Maestro's flat
// SignalInstance, or {status, signal_instance}.
func decodeSignal(raw json.RawMessage) (*SignalResult, error) {
	type inst struct {
		Name       string `json:"name"`
		SeqID      int64  `json:"seq_id"`
		Duplicated bool   `json:"duplicated"`
	}
	var w struct {
		inst
		Status string `json:"status"`
		Inner  *inst  `json:"signal_instance"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode signal answer: %w", err)
	}
	if w.Inner != nil {
		w.inst = *w.Inner
		w.Duplicated = w.Status == "DUPLICATED"
	}
	return &SignalResult{Name: w.Name, SeqID: w.SeqID, Duplicated: w.Duplicated, Raw: raw}, nil
}

// TerminalRun reports whether a run status is final.
func TerminalRun(status string) bool { return instance.WorkflowStatus(status).IsTerminal() }

// TerminalStep reports whether a step status is final.
func TerminalStep(status string) bool { return instance.StepStatus(status).IsTerminal() }
