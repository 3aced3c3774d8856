package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// DefaultClusterName is the cluster_name of events when none is configured.
const DefaultClusterName = "maestro"

// Wire is a stored event as it travels to a publisher (the SQS message
// body): the external event with its event_id, without cluster_name and
// send_time. Render turns it into the external event. A payload this build
// cannot read is passed on as stored (Render refuses it).
func Wire(e Event) []byte {
	b, err := Expand(e)
	if err != nil {
		return e.Payload
	}
	return b
}

// withID adds an event_id to a JSON object.
func withID(payload []byte, id string) []byte {
	p := bytes.TrimSpace(payload)
	if len(p) < 2 || p[0] != '{' {
		return p
	}
	var b bytes.Buffer
	b.Grow(len(p) + 40)
	b.WriteString(`{"event_id":"`)
	b.WriteString(id)
	b.WriteByte('"')
	if rest := bytes.TrimSpace(p[1:]); len(rest) > 0 && rest[0] != '}' {
		b.WriteByte(',')
	}
	b.Write(p[1:])
	return b.Bytes()
}

// Meta is what routing and filtering an event needs to know of it.
type Meta struct {
	EventID    string
	Type       Type
	WorkflowID string
	// InstanceID, RunID and StepID are set for status changes and run
	// alerts.
	InstanceID int64
	RunID      int64
	StepID     string
	// Statuses are the new statuses of a status change (several for a
	// step event that carries several changes), or an alert's status.
	Statuses []string
	// AlertType is set for alerts.
	AlertType string
	// Subject is a one-line summary (the e-mail subject of alerts).
	Subject string
	// Text is a readable body for people (alerts).
	Text string
}

// Message attribute names a published event carries (SNS message
// attributes), so that subscribers filter with subscription filter
// policies.
const (
	// AttributeType is the event type (every event).
	AttributeType = "type"
	// AttributeWorkflowID is the workflow id (every event).
	AttributeWorkflowID = "workflow_id"
	// AttributeClusterName is the cluster name (every event).
	AttributeClusterName = "cluster_name"
	// AttributeInstanceID is the workflow instance id, a Number (status
	// changes and run alerts).
	AttributeInstanceID = "workflow_instance_id"
	// AttributeStepID is the step id (step events and step alerts).
	AttributeStepID = "step_id"
	// AttributeStatus holds the new statuses, a String.Array.
	AttributeStatus = "status"
	// AttributeAlertType is the alert type (alerts).
	AttributeAlertType = "alert_type"
)

// AttributeNames lists every message attribute an event may carry.
func AttributeNames() []string {
	return []string{AttributeType, AttributeWorkflowID, AttributeClusterName, AttributeInstanceID,
		AttributeStepID, AttributeStatus, AttributeAlertType}
}

// Attribute is one message attribute: its SNS data type (String, Number
// or String.Array) and value.
type Attribute struct {
	DataType string
	Value    string
}

// Attributes are the message attributes of the event m describes,
// published in cluster.
func (m Meta) Attributes(cluster string) map[string]Attribute {
	str := func(v string) Attribute { return Attribute{DataType: "String", Value: v} }
	attrs := map[string]Attribute{
		AttributeType:        str(string(m.Type)),
		AttributeWorkflowID:  str(m.WorkflowID),
		AttributeClusterName: str(cluster),
	}
	if m.InstanceID > 0 {
		attrs[AttributeInstanceID] = Attribute{DataType: "Number", Value: strconv.FormatInt(m.InstanceID, 10)}
	}
	if m.StepID != "" {
		attrs[AttributeStepID] = str(m.StepID)
	}
	if len(m.Statuses) > 0 {
		b, _ := json.Marshal(m.Statuses)
		attrs[AttributeStatus] = Attribute{DataType: "String.Array", Value: string(b)}
	}
	if m.AlertType != "" {
		attrs[AttributeAlertType] = str(m.AlertType)
	}
	return attrs
}

// Render turns a wire event (Wire) into the external event: the event with
// its cluster name and send time, fields in Maestro's order. id, when not
// empty, is the event's id (for a payload that does not carry it yet).
func Render(wire []byte, id, cluster string, sent time.Time) ([]byte, Meta, error) {
	var head struct {
		Type Type `json:"type"`
	}
	if err := json.Unmarshal(wire, &head); err != nil {
		return nil, Meta{}, fmt.Errorf("decode event: %w", err)
	}
	if cluster == "" {
		cluster = DefaultClusterName
	}
	ms := sent.UnixMilli()
	switch head.Type {
	case StepInstanceStatusChange:
		return render[StepInstanceStatusChangeEvent](wire, id, cluster, ms)
	case WorkflowInstanceStatusChange:
		return render[WorkflowInstanceStatusChangeEvent](wire, id, cluster, ms)
	case Alert:
		return render[AlertEvent](wire, id, cluster, ms)
	case BackfillStatusChange:
		return render[BackfillStatusChangeEvent](wire, id, cluster, ms)
	}
	if _, ok := kinds[head.Type]; !ok {
		return nil, Meta{}, fmt.Errorf("unknown event type %q", head.Type)
	}
	return render[WorkflowChangeEvent](wire, id, cluster, ms)
}

// stamper is an event type's pointer: it takes the fields publishing adds
// and says what routing needs to know.
type stamper[T any] interface {
	*T
	stamp(id, cluster string, sent int64) Meta
}

func render[T any, P stamper[T]](wire []byte, id, cluster string, sent int64) ([]byte, Meta, error) {
	var e T
	if err := json.Unmarshal(wire, &e); err != nil {
		return nil, Meta{}, fmt.Errorf("decode event: %w", err)
	}
	m := P(&e).stamp(id, cluster, sent)
	b, err := json.Marshal(&e)
	if err != nil {
		return nil, Meta{}, fmt.Errorf("encode %s: %w", m.Type, err)
	}
	return b, m, nil
}

func (e *StepInstanceStatusChangeEvent) stamp(id, cluster string, sent int64) Meta {
	setID(&e.EventID, id)
	e.ClusterName, e.SendTime = cluster, sent
	m := Meta{EventID: e.EventID, Type: e.Type, WorkflowID: e.WorkflowID, InstanceID: e.WorkflowInstanceID,
		RunID: e.WorkflowRunID, StepID: e.StepID}
	for _, r := range e.StatusChangeRecords {
		m.Statuses = append(m.Statuses, string(r.NewStatus))
	}
	return m
}

func (e *WorkflowInstanceStatusChangeEvent) stamp(id, cluster string, sent int64) Meta {
	setID(&e.EventID, id)
	e.ClusterName, e.SendTime = cluster, sent
	return Meta{EventID: e.EventID, Type: e.Type, WorkflowID: e.WorkflowID, InstanceID: e.WorkflowInstanceID,
		RunID: e.WorkflowRunID, Statuses: []string{string(e.NewStatus)}}
}

func (e *AlertEvent) stamp(id, cluster string, sent int64) Meta {
	setID(&e.EventID, id)
	e.ClusterName, e.SendTime = cluster, sent
	m := Meta{EventID: e.EventID, Type: e.Type, WorkflowID: e.WorkflowID, InstanceID: e.WorkflowInstanceID,
		RunID: e.WorkflowRunID, StepID: e.StepID, AlertType: e.AlertType}
	if e.Status != "" {
		m.Statuses = []string{e.Status}
	}
	m.Subject, m.Text = alertText(e)
	return m
}

func (e *WorkflowChangeEvent) stamp(id, cluster string, sent int64) Meta {
	setID(&e.EventID, id)
	e.ClusterName, e.SendTime = cluster, sent
	return Meta{EventID: e.EventID, Type: e.Type, WorkflowID: e.WorkflowID}
}

func (e *BackfillStatusChangeEvent) stamp(id, cluster string, sent int64) Meta {
	setID(&e.EventID, id)
	e.ClusterName, e.SendTime = cluster, sent
	return Meta{EventID: e.EventID, Type: e.Type, WorkflowID: e.WorkflowID, Statuses: []string{e.NewStatus}}
}

func setID(dst *string, id string) {
	if id != "" {
		*dst = id
	}
}

// alertText is an alert for people: a subject line and a body with the
// reason and the run's link.
func alertText(e *AlertEvent) (subject, text string) {
	target := e.WorkflowID
	if e.WorkflowInstanceID > 0 {
		target += "/" + strconv.FormatInt(e.WorkflowInstanceID, 10) + "/" + strconv.FormatInt(e.WorkflowRunID, 10)
	}
	if e.StepID != "" {
		target += " step " + e.StepID
	}
	subject = "[Maestro] " + e.AlertType + ": " + target
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s alert for workflow %s", e.AlertType, e.WorkflowID)
	if e.WorkflowInstanceID > 0 {
		fmt.Fprintf(&b, ", instance %d run %d", e.WorkflowInstanceID, e.WorkflowRunID)
	}
	if e.StepID != "" {
		fmt.Fprintf(&b, ", step %s (attempt %d)", e.StepID, e.StepAttemptID)
	}
	b.WriteString(".\n\n")
	if e.Status != "" {
		fmt.Fprintf(&b, "Status: %s\n", e.Status)
	}
	fmt.Fprintf(&b, "Reason: %s\n", e.Reason)
	if e.Link != "" {
		fmt.Fprintf(&b, "Run: %s\n", e.Link)
	}
	fmt.Fprintf(&b, "Time: %s\n", time.UnixMilli(e.EventTime).UTC().Format(time.RFC3339))
	return subject, b.String()
}
