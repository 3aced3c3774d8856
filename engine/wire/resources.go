package wire

import "encoding/json"

// StepBreakpoint is Maestro's StepBreakpoint. BreakpointID is this
// implementation's own.
type StepBreakpoint struct {
	WorkflowID   string `json:"workflow_id"`
	StepID       string `json:"step_id"`
	VersionID    *int64 `json:"workflow_version_id,omitempty"`
	InstanceID   *int64 `json:"workflow_instance_id,omitempty"`
	RunID        *int64 `json:"workflow_run_id,omitempty"`
	AttemptID    *int64 `json:"step_attempt_id,omitempty"`
	CreateTime   int64  `json:"create_time"`
	CreatedBy    string `json:"created_by,omitempty"`
	BreakpointID int64  `json:"breakpoint_id"`
}

// PausedStepAttempt is Maestro's PausedStepAttempt.
type PausedStepAttempt struct {
	WorkflowID string `json:"workflow_id"`
	VersionID  int64  `json:"workflow_version_id"`
	InstanceID int64  `json:"workflow_instance_id"`
	RunID      int64  `json:"workflow_run_id"`
	StepID     string `json:"step_id"`
	AttemptID  int64  `json:"step_attempt_id"`
	CreateTime int64  `json:"create_time"`
}

// StepBreakpointDeleteResponse is Maestro's answer to removing a step's
// breakpoints. Deleted and Resumed are this implementation's own.
type StepBreakpointDeleteResponse struct {
	WorkflowID    string         `json:"workflow_id"`
	StepID        string         `json:"step_id"`
	TimelineEvent *TimelineEvent `json:"timeline_event"`
	Deleted       int64          `json:"deleted"`
	Resumed       int            `json:"resumed"`
}

// TagPermit is Maestro's TagPermit: its extra fields (source, ...) are
// written inline. Held, CreatedBy, ModifiedBy, CreateTime and ModifyTime
// are this implementation's own.
type TagPermit struct {
	Tag        string                     `json:"tag"`
	MaxAllowed int64                      `json:"max_allowed"`
	Timeline   json.RawMessage            `json:"timeline,omitempty"`
	Held       int64                      `json:"held"`
	CreatedBy  string                     `json:"created_by,omitempty"`
	ModifiedBy string                     `json:"modified_by,omitempty"`
	CreateTime int64                      `json:"create_time"`
	ModifyTime int64                      `json:"modify_time"`
	Extra      map[string]json.RawMessage `json:"-"`
}

// MarshalJSON writes the named fields, then the extra ones.
func (p TagPermit) MarshalJSON() ([]byte, error) {
	type plain TagPermit
	return withExtra(plain(p), p.Extra)
}

// SignalInstance is Maestro's SignalInstance. Duplicated is this
// implementation's own: true when the announcement repeated an earlier
// request_id, whose instance is returned.
type SignalInstance struct {
	Name        string         `json:"name"`
	SeqID       int64          `json:"seq_id"`
	InstanceID  string         `json:"instance_id"`
	Params      map[string]any `json:"params,omitempty"`
	Payload     map[string]any `json:"payload,omitempty"`
	RequestID   string         `json:"request_id,omitempty"`
	RequestTime int64          `json:"request_time"`
	CreateTime  int64          `json:"create_time"`
	Duplicated  bool           `json:"duplicated,omitempty"`
}

// JobTemplate is Maestro's JobTemplate: metadata and definition.
type JobTemplate struct {
	Metadata   json.RawMessage `json:"metadata"`
	Definition json.RawMessage `json:"definition"`
}

// StepIteration is Maestro's foreach flatten StepIteration: one iteration
// of a step inside (nested) foreach steps.
type StepIteration struct {
	WorkflowID          string            `json:"workflow_id"`
	InstanceID          int64             `json:"workflow_instance_id"`
	RunID               int64             `json:"workflow_run_id"`
	StepID              string            `json:"step_id"`
	IterationRank       string            `json:"iteration_rank"`
	StepAttemptSeq      string            `json:"step_attempt_seq"`
	LeafStepInstanceRef *StepInstanceRef  `json:"leaf_step_instance_ref,omitempty"`
	LoopParams          map[string]string `json:"loop_params,omitempty"`
	StepRuntimeState    *StepRuntime      `json:"step_runtime_state"`
}

// StepInstanceRef is Maestro's StepInstanceReference: the attempt an
// iteration's view shows.
type StepInstanceRef struct {
	WorkflowID string `json:"workflow_id"`
	InstanceID int64  `json:"workflow_instance_id"`
	RunID      int64  `json:"workflow_run_id"`
	StepID     string `json:"step_id"`
	AttemptID  int64  `json:"step_attempt_id"`
}

// StepIterationsSummary is Maestro's StepIterationsSummary.
type StepIterationsSummary struct {
	RepresentativeIteration *StepIteration      `json:"representative_iteration,omitempty"`
	CountByStatus           map[string]int64    `json:"count_by_status,omitempty"`
	Range                   []int64             `json:"range,omitempty"`
	LoopParamValues         map[string][]string `json:"loop_param_values,omitempty"`
}
