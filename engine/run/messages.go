package run

import (
	"encoding/json"
	"fmt"
)

// The payloads of the queue messages that carry work to the engine
// (engine/queue), and the identity a child run keeps of its parent.

// Action is an instance action the API asks for.
type Action string

// Instance actions.
const (
	ActionStop Action = "stop"
	ActionKill Action = "kill"
)

// StartMessage is the payload of a start_workflow queue message.
type StartMessage struct {
	Ref
	Group int32 `json:"group_id"`
}

// StartNote is what the notification of a lone start carries of its run
// (insertRunsSQL's note, queue.NotifyNotedSQL): its start message and
// what starting it needs, but for its definition, which is its version's,
// named by the sha256 of its JSON as stored (DefinitionSHA256). The engine starts the run from it without
// reading the run (or claiming the message) when it has that definition.
type StartNote struct {
	StartMessage
	Version     int64           `json:"version"`
	GroupCount  int32           `json:"group_count"`
	UUID        string          `json:"uuid"`
	RunParams   json.RawMessage `json:"run_params"`
	Initiator   json.RawMessage `json:"initiator"`
	Timeout     int64           `json:"timeout"`
	RunConfig   json.RawMessage `json:"run_config"`
	Parent      json.RawMessage `json:"parent"`
	Depth       int             `json:"depth"`
	Correlation string          `json:"correlation"`
	Trace       string          `json:"trace"`
	BackfillID  string          `json:"backfill_id"`
	Incremental json.RawMessage `json:"incremental"`
	// DefinitionSHA256 is the sha256 of the run's definition, its
	// version's, as PostgreSQL renders the stored jsonb (what a read of
	// the run returns).
	DefinitionSHA256 []byte `json:"definition_sha256"`
	// Owner is the owner of the workflow ("" when it is gone).
	Owner string `json:"owner"`
}

// ActionMessage is the payload of an instance_action queue message. With
// StepID set it is a step action (restart, skip, ...).
type ActionMessage struct {
	Ref
	Group  int32  `json:"group_id"`
	Action Action `json:"action"`
	StepID string `json:"step_id,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// StepUpdateMessage is the payload of a step_update queue message: the
// attempt's state changed outside the engine (resumed, breakpoint deleted,
// a child run ended) and its actor should look again.
type StepUpdateMessage struct {
	Ref
	Group  int32  `json:"group_id"`
	StepID string `json:"step_id"`
}

// Parent identifies the step attempt that created a child run; it is the
// workflow_instance.parent column of the child.
type Parent struct {
	Ref
	StepID    string `json:"step_id"`
	AttemptID int64  `json:"attempt_id"`
	Group     int32  `json:"group_id"`
	// Iteration is the 1-based iteration of a while or foreach step the
	// run is; zero for a subworkflow child.
	Iteration int64 `json:"iteration,omitempty"`
}

// Key is the parent's identity as one string (workflow_instance.parent_key).
func (p Parent) Key() string {
	k := fmt.Sprintf("%s/%d/%d/%s/%d", p.WorkflowID, p.InstanceID, p.RunID, p.StepID, p.AttemptID)
	if p.Iteration > 0 {
		k += fmt.Sprintf("/i%d", p.Iteration)
	}
	return k
}
