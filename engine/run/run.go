// Package run owns a run's identity and its hand-off to the engine: the
// names of a run (Ref, Parent), the queue messages that carry work to the
// engine (start, instance and step actions, step updates), the action
// tables and their checks, run-strategy admission, the events of run
// status changes, and Create, the one function that creates runs (starts,
// batch starts, restarts, subworkflow and foreach children). It sits below
// the engine and the API: both import it, neither through the other. See
// docs/architecture.md ("engine/run") and docs/run-control.md.
package run

import (
	"errors"
	"fmt"
)

// DefaultGroupCount is how many flow groups runs are spread over when a
// deployment sets no count.
const DefaultGroupCount = 16

// ErrFenced reports a write refused because this node no longer holds the
// generation of the flow's group: another node has taken the flow over.
var ErrFenced = errors.New("flow is owned by another engine node (generation fenced)")

// Ref names one run of a workflow instance.
type Ref struct {
	WorkflowID string `json:"workflow_id"`
	InstanceID int64  `json:"instance_id"`
	RunID      int64  `json:"run_id"`
}

// String is the run as workflow/instance/run.
func (r Ref) String() string { return fmt.Sprintf("%s/%d/%d", r.WorkflowID, r.InstanceID, r.RunID) }

// CorrelationSQL is a run's correlation id: its root run's identity
// (docs/events.md).
const CorrelationSQL = `COALESCE(correlation_id, workflow_id || ':' || instance_id || ':' || run_id)`
