package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/wire"
)

// This file is the one place that reads the API's answers. Their shapes
// are declared once, in engine/wire, as the API writes them (Maestro's:
// epoch-millisecond times, flat answers, PaginationResult); this file turns
// them into the views the command line prints.

// Time is a time the API answers as epoch milliseconds.
type Time struct{ time.Time }

// UnmarshalJSON reads a number of milliseconds; null is the zero time.
func (t *Time) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("time %s: %w", b, err)
	}
	t.Time = time.UnixMilli(ms)
	return nil
}

// millis is the Time of epoch milliseconds; nil and 0 are the zero time.
func millis(ms *int64) Time {
	if ms == nil || *ms == 0 {
		return Time{}
	}
	return Time{time.UnixMilli(*ms)}
}

// MarshalJSON writes epoch milliseconds, as Maestro does.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, t.UnixMilli(), 10), nil
}

// EventText is a timeline event as one line of prose.
func EventText(e wire.TimelineEvent) string {
	s := e.Message
	switch {
	case e.Type == wire.EventStatus && s == "":
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
	// Warnings of a push (a workflow handed to another owner).
	Warnings []string
	// Raw is the answer as the API sent it.
	Raw json.RawMessage
}

// decodeVersion reads a version: a push's answer (Maestro's
// WorkflowCreateResponse) or a Maestro WorkflowDefinition.
func decodeVersion(raw json.RawMessage) (*Version, error) {
	var w struct {
		wire.WorkflowCreateResponse
		wire.WorkflowDefinition
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode workflow version: %w", err)
	}
	v := &Version{Raw: raw}
	def := &w.WorkflowDefinition
	if d := w.WorkflowCreateResponse.WorkflowDefinition; d != nil {
		created := w.Created
		v.Created, v.ActiveVersion, v.LatestVersion, def = &created, w.ActiveVersionID, w.LatestVersionID, d
		v.Warnings = w.Warnings
	}
	v.IsActive, v.Workflow = def.IsActive, def.Workflow
	if m := def.Metadata; m != nil {
		v.WorkflowID, v.VersionID, v.CreateTime, v.CreatedBy = m.WorkflowID, m.VersionID, millis(&m.CreateTime), m.VersionAuthor
	}
	return v, nil
}

// WorkflowSummary is one workflow of a listing.
type WorkflowSummary struct {
	WorkflowID       string
	Name             string
	Description      string
	Owner            string
	IsActive         bool
	ActiveVersionID  *int64
	LatestVersionID  int64
	LatestInstanceID int64
	ModifyTime       Time
}

// WorkflowPage is a page of workflows.
type WorkflowPage struct {
	Items []WorkflowSummary
	// Next is the cursor of the next page; "" on the last.
	Next string
	Raw  json.RawMessage
}

// decodeWorkflowPage reads a listing (wire.WorkflowList).
func decodeWorkflowPage(raw json.RawMessage) (*WorkflowPage, error) {
	var w wire.WorkflowList
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode workflow list: %w", err)
	}
	p := &WorkflowPage{Items: make([]WorkflowSummary, 0, len(w.Items)), Raw: raw}
	if w.Next != nil {
		p.Next = *w.Next
	}
	for _, s := range w.Items {
		p.Items = append(p.Items, WorkflowSummary{WorkflowID: s.WorkflowID, Name: s.Name, Description: s.Description,
			Owner: s.Owner, IsActive: s.IsActive, ActiveVersionID: s.ActiveVersionID, LatestVersionID: s.LatestVersionID,
			LatestInstanceID: s.LatestInstanceID, ModifyTime: millis(&s.ModifyTime)})
	}
	return p, nil
}

// Overview is a workflow's overview.
type Overview struct {
	WorkflowID       string
	ActiveVersionID  *int64
	LatestVersionID  int64
	DefaultVersionID int64
	Owner            string
	CreatedBy        string
	CreateTime       Time
	ModifyTime       Time
	// LatestInstanceID is the newest instance's id (0: never run).
	LatestInstanceID int64
	// StatusCounts counts the recent instances by status.
	StatusCounts map[string]int64
	Raw          json.RawMessage
}

// decodeOverview reads an overview (wire.WorkflowOverviewResponse).
func decodeOverview(raw json.RawMessage) (*Overview, error) {
	var w wire.WorkflowOverviewResponse
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode workflow overview: %w", err)
	}
	o := &Overview{WorkflowID: w.WorkflowID, ActiveVersionID: w.ActiveVersionID, LatestVersionID: w.LatestVersionID,
		DefaultVersionID: w.DefaultVersionID, Owner: w.Owner, CreatedBy: w.CreatedBy, CreateTime: millis(&w.CreateTime),
		ModifyTime: millis(&w.ModifyTime), LatestInstanceID: w.LatestInstanceID, StatusCounts: map[string]int64{}, Raw: raw}
	if w.Instances != nil {
		for k, n := range w.Instances.StatusCounts {
			o.StatusCounts[k] = n
		}
	}
	return o, nil
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
	Timeline   []wire.TimelineEvent
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

func decodeRun(raw json.RawMessage) (*Run, error) {
	var w wire.WorkflowInstance
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode workflow run: %w", err)
	}
	timeline, err := decodeTimeline(w.Timeline)
	if err != nil {
		return nil, fmt.Errorf("decode workflow run %s/%d: %w", w.WorkflowID, w.InstanceID, err)
	}
	r := &Run{WorkflowID: w.WorkflowID, InstanceID: w.InstanceID, RunID: w.RunID, VersionID: w.VersionID, UUID: w.UUID,
		Status: w.Status, CreateTime: millis(&w.CreateTime), StartTime: millis(w.StartTime), EndTime: millis(w.EndTime),
		Initiator: w.Initiator, RunParams: w.RunParams, Params: w.Params, Workflow: w.RuntimeWorkflow, Raw: raw,
		Timeline: timeline, StepCounts: map[string]int64{}}
	if ov := w.RuntimeOverview; ov != nil {
		r.TotalSteps = ov.TotalStepCount
		for st, sum := range ov.StepOverview {
			if sum != nil {
				r.StepCounts[st] = sum.Count
			}
		}
		if ro := ov.RollupOverview; ro != nil {
			r.Rollup = &Rollup{Total: ro.TotalLeafCount, Counts: map[string]int64{}}
			for st, c := range ro.Overview {
				if c != nil {
					r.Rollup.Counts[st] = c.Count
				}
			}
		}
	}
	return r, nil
}

// decodeTimeline reads a run's or a step's timeline, an array of events.
func decodeTimeline(raw json.RawMessage) ([]wire.TimelineEvent, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var evs []wire.TimelineEvent
	if err := json.Unmarshal(raw, &evs); err != nil {
		return nil, fmt.Errorf("decode timeline: %w", err)
	}
	return evs, nil
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
	Timeline   []wire.TimelineEvent
	Raw        json.RawMessage
}

func decodeStep(raw json.RawMessage) (*Step, error) {
	var w wire.StepInstance
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode step: %w", err)
	}
	timeline, err := decodeTimeline(w.Timeline)
	if err != nil {
		return nil, fmt.Errorf("decode step %s: %w", w.StepID, err)
	}
	s := &Step{WorkflowID: w.WorkflowID, InstanceID: w.InstanceID, RunID: w.RunID, StepID: w.StepID, AttemptID: w.AttemptID,
		Type: w.StepType, Params: w.Params, Outputs: w.Outputs, Timeline: timeline, Raw: raw}
	if w.StepRetry != nil {
		if s.Retry, err = json.Marshal(w.StepRetry); err != nil {
			return nil, fmt.Errorf("decode step %s retry: %w", w.StepID, err)
		}
	}
	// Maestro keeps the status and its times in runtime_state.
	if rs := w.RuntimeState; rs != nil {
		s.Status, s.StartTime, s.EndTime, s.Message = rs.Status, millis(rs.StartTime), millis(rs.EndTime), rs.Message
	}
	return s, nil
}

// decodeSteps reads a run's steps, a JSON array.
func decodeSteps(raw json.RawMessage) ([]*Step, error) { return decodeList(raw, decodeStep) }

// decodeList reads a listing's elements (listItems) with decode.
func decodeList[T any](raw json.RawMessage, decode func(json.RawMessage) (T, error)) ([]T, error) {
	items, err := listItems(raw)
	if err != nil {
		return nil, fmt.Errorf("decode a listing: %w", err)
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

// listItems reads the elements of a listing: a bare array, or Maestro's
// PaginationResult {"elements": [...]}.
func listItems(raw json.RawMessage) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	var items []json.RawMessage
	if len(raw) > 0 && raw[0] == '[' {
		err := json.Unmarshal(raw, &items)
		return items, err
	}
	var page wire.PaginationResult[json.RawMessage]
	err := json.Unmarshal(raw, &page)
	return page.Elements, err
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

// decodeStart reads a start or restart answer, Maestro's
// WorkflowStartResponse.
func decodeStart(raw json.RawMessage) (*StartResult, error) {
	var w wire.WorkflowStartResponse
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode start answer: %w", err)
	}
	return &StartResult{WorkflowID: w.WorkflowID, VersionID: w.VersionID, InstanceID: w.InstanceID, RunID: w.RunID,
		Status: w.Status, Raw: raw}, nil
}

// decodeRuns reads a listing of instances.
func decodeRuns(raw json.RawMessage) ([]*Run, error) { return decodeList(raw, decodeRun) }

// decodeSignal reads a signal announcement's answer, Maestro's
// SignalInstance.
func decodeSignal(raw json.RawMessage) (*SignalResult, error) {
	var w wire.SignalInstance
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode signal answer: %w", err)
	}
	return &SignalResult{Name: w.Name, SeqID: w.SeqID, Duplicated: w.Duplicated, Raw: raw}, nil
}

// TerminalRun reports whether a run status is final.
func TerminalRun(status string) bool { return instance.WorkflowStatus(status).IsTerminal() }

// TerminalStep reports whether a step status is final.
func TerminalStep(status string) bool { return instance.StepStatus(status).IsTerminal() }
