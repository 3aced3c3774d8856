package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/maestro-aws/maestro/engine/instance"
)

// The status change events, written on every step write, are stored in a
// compact form: short keys, a step's changes as a chain (each change's old
// status is the one before's new status), and without what the row's
// columns hold (the type is the kind; the workflow id and the seq are
// columns). It cuts what they add to a step write's WAL by about half
// (BenchmarkStepWrites reports the bytes). Expand restores the external
// shape before an event leaves the outbox.

// change is one status change of a chain: ["RUNNING", 1700000000100].
type change struct {
	Status instance.StepStatus
	Time   int64
}

// MarshalJSON writes the change as a pair.
func (c change) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]any{c.Status, c.Time})
}

// UnmarshalJSON reads a pair.
func (c *change) UnmarshalJSON(b []byte) error {
	var pair [2]json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil {
		return err
	}
	if err := json.Unmarshal(pair[0], &c.Status); err != nil {
		return err
	}
	return json.Unmarshal(pair[1], &c.Time)
}

// compactStep is a StepInstanceStatusChangeEvent.
type compactStep struct {
	InstanceID  int64  `json:"i"`
	RunID       int64  `json:"r"`
	StepID      string `json:"s"`
	AttemptID   int64  `json:"a"`
	UUID        string `json:"u"`
	StepUUID    string `json:"v"`
	Correlation string `json:"c"`
	StepIndex   int64  `json:"x"`
	// From is the first change's old status.
	From     instance.StepStatus `json:"f"`
	Changes  []change            `json:"t"`
	SyncTime int64               `json:"y"`
	// Backfill is the run's backfill id, absent for none.
	Backfill string `json:"b,omitempty"`
}

// compactRun is a WorkflowInstanceStatusChangeEvent.
type compactRun struct {
	InstanceID  int64                   `json:"i"`
	RunID       int64                   `json:"r"`
	UUID        string                  `json:"u"`
	Correlation string                  `json:"c"`
	Depth       int                     `json:"d"`
	Name        string                  `json:"m"`
	Tags        []Tag                   `json:"g,omitempty"`
	Old         instance.WorkflowStatus `json:"o"`
	New         instance.WorkflowStatus `json:"n"`
	EventTime   int64                   `json:"e"`
	SyncTime    int64                   `json:"y"`
	Backfill    string                  `json:"b,omitempty"`
	Incremental *IncrementalRange       `json:"x,omitempty"`
}

func compactStepOf(e *StepInstanceStatusChangeEvent) compactStep {
	c := compactStep{InstanceID: e.WorkflowInstanceID, RunID: e.WorkflowRunID, StepID: e.StepID, AttemptID: e.StepAttemptID,
		UUID: e.WorkflowUUID, StepUUID: e.StepUUID, Correlation: e.CorrelationID, StepIndex: e.StepInstanceID,
		SyncTime: e.SyncTime, Backfill: e.BackfillID, Changes: make([]change, len(e.StatusChangeRecords))}
	for i, r := range e.StatusChangeRecords {
		if i == 0 {
			c.From = r.OldStatus
		}
		c.Changes[i] = change{Status: r.NewStatus, Time: r.EventTime}
	}
	return c
}

// appendJSON encodes the event as encoding/json would, without
// reflection: it is built on every step write.
func (c *compactStep) appendJSON(b []byte) []byte {
	b = append(b, `{"i":`...)
	b = strconv.AppendInt(b, c.InstanceID, 10)
	b = append(b, `,"r":`...)
	b = strconv.AppendInt(b, c.RunID, 10)
	b = append(b, `,"s":`...)
	b = appendString(b, c.StepID)
	b = append(b, `,"a":`...)
	b = strconv.AppendInt(b, c.AttemptID, 10)
	b = append(b, `,"u":`...)
	b = appendString(b, c.UUID)
	b = append(b, `,"v":`...)
	b = appendString(b, c.StepUUID)
	b = append(b, `,"c":`...)
	b = appendString(b, c.Correlation)
	b = append(b, `,"x":`...)
	b = strconv.AppendInt(b, c.StepIndex, 10)
	b = append(b, `,"f":`...)
	b = appendString(b, string(c.From))
	b = append(b, `,"t":[`...)
	for i, ch := range c.Changes {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendString(b, string(ch.Status))
		b = append(b, ',')
		b = strconv.AppendInt(b, ch.Time, 10)
		b = append(b, ']')
	}
	b = append(b, `],"y":`...)
	b = strconv.AppendInt(b, c.SyncTime, 10)
	if c.Backfill != "" {
		b = append(b, `,"b":`...)
		b = appendString(b, c.Backfill)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string as encoding/json writes it: the
// ASCII ids and statuses of status changes directly, anything that needs
// escaping beyond quotes and backslashes through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\', c)
		} else {
			b = append(b, c)
		}
	}
	return append(b, '"')
}

func (c compactStep) expand(workflowID string, seq int64) *StepInstanceStatusChangeEvent {
	e := &StepInstanceStatusChangeEvent{WorkflowID: workflowID, WorkflowInstanceID: c.InstanceID, WorkflowRunID: c.RunID,
		StepID: c.StepID, StepAttemptID: c.AttemptID, WorkflowUUID: c.UUID, StepUUID: c.StepUUID, CorrelationID: c.Correlation,
		StepInstanceID: c.StepIndex, Seq: seq, SyncTime: c.SyncTime, BackfillID: c.Backfill, Type: StepInstanceStatusChange,
		StatusChangeRecords: make([]StatusChangeRecord, len(c.Changes))}
	from := c.From
	for i, ch := range c.Changes {
		e.StatusChangeRecords[i] = StatusChangeRecord{OldStatus: from, NewStatus: ch.Status, EventTime: ch.Time}
		from = ch.Status
	}
	return e
}

func compactRunOf(e *WorkflowInstanceStatusChangeEvent) compactRun {
	return compactRun{InstanceID: e.WorkflowInstanceID, RunID: e.WorkflowRunID, UUID: e.WorkflowUUID, Correlation: e.CorrelationID,
		Depth: e.Depth, Name: e.WorkflowName, Tags: e.Tags, Old: e.OldStatus, New: e.NewStatus, EventTime: e.EventTime,
		SyncTime: e.SyncTime, Backfill: e.BackfillID, Incremental: e.Incremental}
}

func (c compactRun) expand(workflowID string, seq int64) *WorkflowInstanceStatusChangeEvent {
	return &WorkflowInstanceStatusChangeEvent{WorkflowID: workflowID, WorkflowInstanceID: c.InstanceID, WorkflowRunID: c.RunID,
		WorkflowUUID: c.UUID, CorrelationID: c.Correlation, Depth: c.Depth, WorkflowName: c.Name, Tags: c.Tags,
		OldStatus: c.Old, NewStatus: c.New, EventTime: c.EventTime, Seq: seq, SyncTime: c.SyncTime,
		BackfillID: c.Backfill, Incremental: c.Incremental, Type: WorkflowInstanceStatusChange}
}

// errNoPayload reports an event read without its payload (Consume).
var errNoPayload = errors.New("event read without its payload")

// Expand returns a stored event in the external shape, with its event_id,
// without cluster_name and send_time (what publishing adds).
func Expand(e Event) ([]byte, error) {
	if e.Payload == nil {
		return nil, fmt.Errorf("event %s: %w", e.EventID(), errNoPayload)
	}
	var v any
	switch e.Kind {
	case kinds[StepInstanceStatusChange]:
		var c compactStep
		if err := json.Unmarshal(e.Payload, &c); err != nil {
			return nil, fmt.Errorf("decode event %s: %w", e.EventID(), err)
		}
		ev := c.expand(e.WorkflowID, e.Seq)
		ev.EventID = e.EventID()
		v = ev
	case kinds[WorkflowInstanceStatusChange]:
		var c compactRun
		if err := json.Unmarshal(e.Payload, &c); err != nil {
			return nil, fmt.Errorf("decode event %s: %w", e.EventID(), err)
		}
		ev := c.expand(e.WorkflowID, e.Seq)
		ev.EventID = e.EventID()
		v = ev
	default:
		return withID(e.Payload, e.EventID()), nil
	}
	return json.Marshal(v)
}
