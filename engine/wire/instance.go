package wire

import "encoding/json"

// WorkflowInstance is Maestro's WorkflowInstance: one run of a workflow
// instance. Queued and the extra fields of Initiator are this
// implementation's own. InternalID is the workflow's internal id (the
// workflow row's, as Maestro's); ExecutionID, as Maestro's, is the id of
// the run's execution in the engine, the run's uuid once an engine has
// started it, absent before.
type WorkflowInstance struct {
	WorkflowID      string           `json:"workflow_id"`
	InstanceID      int64            `json:"workflow_instance_id"`
	RunID           int64            `json:"workflow_run_id"`
	UUID            string           `json:"workflow_uuid"`
	CorrelationID   string           `json:"correlation_id"`
	VersionID       int64            `json:"workflow_version_id"`
	GroupInfo       int64            `json:"group_info"`
	InternalID      *int64           `json:"internal_id,omitempty"`
	ExecutionID     *string          `json:"execution_id,omitempty"`
	RunConfig       json.RawMessage  `json:"run_config,omitempty"`
	RunParams       json.RawMessage  `json:"run_params,omitempty"`
	RuntimeWorkflow json.RawMessage  `json:"runtime_workflow,omitempty"`
	RuntimeDAG      json.RawMessage  `json:"runtime_dag,omitempty"`
	TimeoutInMillis *int64           `json:"timeout_in_millis,omitempty"`
	Params          json.RawMessage  `json:"params,omitempty"`
	Initiator       json.RawMessage  `json:"initiator"`
	Status          string           `json:"status"`
	RequestTime     *int64           `json:"request_time,omitempty"`
	CreateTime      int64            `json:"create_time"`
	StartTime       *int64           `json:"start_time,omitempty"`
	EndTime         *int64           `json:"end_time,omitempty"`
	ModifyTime      int64            `json:"modify_time"`
	RuntimeOverview *RuntimeOverview `json:"runtime_overview,omitempty"`
	Artifacts       json.RawMessage  `json:"artifacts,omitempty"`
	Timeline        json.RawMessage  `json:"timeline,omitempty"`
	AggregatedInfo  *AggregatedInfo  `json:"aggregated_info,omitempty"`
	RequestID       *string          `json:"request_id,omitempty"`
	Queued          bool             `json:"queued,omitempty"`
}

// RuntimeOverview is Maestro's WorkflowRuntimeOverview: the run's steps by
// the status of their latest attempt, and the rollup of its leaf steps.
type RuntimeOverview struct {
	TotalStepCount int64                         `json:"total_step_count"`
	StepOverview   map[string]*StepStatusSummary `json:"step_overview"`
	RollupOverview *RollupOverview               `json:"rollup_overview,omitempty"`
}

// StepStatusSummary is Maestro's WorkflowStepStatusSummary: how many steps
// are in a status and, for each, [step ordinal, start time, end time].
type StepStatusSummary struct {
	Count int64      `json:"cnt"`
	Steps [][]*int64 `json:"steps,omitempty"`
}

// RollupOverview is Maestro's WorkflowRollupOverview: leaf steps across
// nested runs, by status, with references to some of them.
type RollupOverview struct {
	TotalLeafCount int64                      `json:"total_leaf_count"`
	Overview       map[string]*CountReference `json:"overview"`
}

// CountReference is Maestro's rollup count of one status. Ref maps
// "workflow_id:run_id" to "instance_id:step_id:attempt_id" references.
type CountReference struct {
	Count int64               `json:"cnt"`
	Ref   map[string][]string `json:"ref,omitempty"`
}

// AggregatedInfo is Maestro's WorkflowInstanceAggregatedInfo: the status
// of each step across the instance's runs.
type AggregatedInfo struct {
	StepAggregatedViews    map[string]StepAggregatedView `json:"step_aggregated_views"`
	WorkflowInstanceStatus string                        `json:"workflow_instance_status"`
}

// StepAggregatedView is Maestro's StepAggregatedView.
type StepAggregatedView struct {
	WorkflowRunID *int64 `json:"workflow_run_id,omitempty"`
	Status        string `json:"status"`
	StartTime     *int64 `json:"start_time,omitempty"`
	EndTime       *int64 `json:"end_time,omitempty"`
	StepAttemptID *int64 `json:"step_attempt_id,omitempty"`
}

// StepInstance is Maestro's StepInstance: one attempt of a step. StepType
// and DetailOmitted are this implementation's own.
type StepInstance struct {
	WorkflowID      string          `json:"workflow_id"`
	InstanceID      int64           `json:"workflow_instance_id"`
	RunID           int64           `json:"workflow_run_id"`
	StepID          string          `json:"step_id"`
	AttemptID       int64           `json:"step_attempt_id"`
	WorkflowUUID    string          `json:"workflow_uuid"`
	StepUUID        string          `json:"step_uuid"`
	CorrelationID   string          `json:"correlation_id"`
	StepInstanceID  int64           `json:"step_instance_id"`
	VersionID       int64           `json:"workflow_version_id"`
	GroupInfo       int64           `json:"group_info"`
	Owner           string          `json:"owner,omitempty"`
	Definition      json.RawMessage `json:"definition,omitempty"`
	Tags            json.RawMessage `json:"tags,omitempty"`
	Params          json.RawMessage `json:"params,omitempty"`
	Transition      json.RawMessage `json:"transition,omitempty"`
	StepRetry       *StepRetry      `json:"step_retry,omitempty"`
	TimeoutInMillis *int64          `json:"timeout_in_millis,omitempty"`
	RuntimeState    *StepRuntime    `json:"runtime_state"`
	Artifacts       json.RawMessage `json:"artifacts,omitempty"`
	Timeline        json.RawMessage `json:"timeline,omitempty"`
	Outputs         json.RawMessage `json:"outputs,omitempty"`
	SignalOutputs   *SignalOutputs  `json:"signal_outputs,omitempty"`
	StepType        string          `json:"step_type"`
	DetailOmitted   bool            `json:"detail_omitted,omitempty"`
}

// SignalOutputs is Maestro's SignalOutputs: the output signals a step
// attempt announced, in the order of its signal_outputs.
type SignalOutputs struct {
	Outputs []SignalOutput `json:"outputs"`
}

// SignalOutput is Maestro's SignalOutputs.SignalOutput: one announced
// signal with its params (plain values), payload, seq id (signal_id) and
// the time it was announced.
type SignalOutput struct {
	Name         string         `json:"name"`
	Params       map[string]any `json:"params,omitempty"`
	Payload      map[string]any `json:"payload,omitempty"`
	SignalID     int64          `json:"signal_id"`
	AnnounceTime int64          `json:"announce_time"`
}

// StepRuntime is Maestro's StepRuntimeState: the attempt's status and the
// time it entered each status. Data, Message and RetryAt (the runtime's
// own state) are this implementation's own.
type StepRuntime struct {
	Status            string          `json:"status"`
	CreateTime        *int64          `json:"create_time,omitempty"`
	InitializeTime    *int64          `json:"initialize_time,omitempty"`
	PauseTime         *int64          `json:"pause_time,omitempty"`
	WaitSignalTime    *int64          `json:"wait_signal_time,omitempty"`
	EvaluateParamTime *int64          `json:"evaluate_param_time,omitempty"`
	WaitPermitTime    *int64          `json:"wait_permit_time,omitempty"`
	StartTime         *int64          `json:"start_time,omitempty"`
	ExecuteTime       *int64          `json:"execute_time,omitempty"`
	FinishTime        *int64          `json:"finish_time,omitempty"`
	EndTime           *int64          `json:"end_time,omitempty"`
	ModifyTime        *int64          `json:"modify_time,omitempty"`
	Data              json.RawMessage `json:"data,omitempty"`
	Message           string          `json:"message,omitempty"`
	RetryAt           *int64          `json:"retry_at,omitempty"`
}

// StepRetry is Maestro's StepInstance.StepRetry.
type StepRetry struct {
	ErrorRetries       int64           `json:"error_retries"`
	ErrorRetryLimit    int64           `json:"error_retry_limit"`
	PlatformRetries    int64           `json:"platform_retries"`
	PlatformRetryLimit int64           `json:"platform_retry_limit"`
	TimeoutRetries     int64           `json:"timeout_retries"`
	TimeoutRetryLimit  int64           `json:"timeout_retry_limit"`
	ManualRetries      int64           `json:"manual_retries"`
	Retryable          bool            `json:"retryable"`
	Backoff            json.RawMessage `json:"backoff,omitempty"`
}

// Status of a start, restart or step restart (Maestro's InstanceRunStatus).
const (
	RunCreated    = "CREATED"
	RunDuplicated = "DUPLICATED"
	RunStopped    = "STOPPED"
)

// WorkflowStartResponse is Maestro's answer to a start and to an instance
// restart (WorkflowInstanceRestartResponse has the same fields).
type WorkflowStartResponse struct {
	WorkflowID    string         `json:"workflow_id"`
	VersionID     int64          `json:"workflow_version_id"`
	InstanceID    int64          `json:"workflow_instance_id"`
	RunID         int64          `json:"workflow_run_id"`
	UUID          string         `json:"workflow_uuid"`
	Status        string         `json:"status"`
	TimelineEvent *TimelineEvent `json:"timeline_event"`
}

// WorkflowInstanceActionResponse is Maestro's answer to stop, kill and
// unblock of an instance run.
type WorkflowInstanceActionResponse struct {
	WorkflowID     string         `json:"workflow_id"`
	InstanceID     int64          `json:"workflow_instance_id"`
	RunID          int64          `json:"workflow_run_id"`
	InstanceStatus string         `json:"workflow_instance_status"`
	Info           string         `json:"info"`
	TimelineEvent  *TimelineEvent `json:"timeline_event"`
	Completed      bool           `json:"completed"`
}

// Infos of WorkflowInstanceActionResponse, Maestro's wording.
const (
	InfoAccepted  = "The action is accepted and is still running. Please check it again."
	InfoCompleted = "The action is completed."
	InfoDone      = "The action is done."
	InfoNoop      = "The action is done without any operation."
)

// StepInstanceActionResponse is Maestro's answer to a step action (stop,
// kill, skip, bypass, resume).
type StepInstanceActionResponse struct {
	WorkflowID       string         `json:"workflow_id"`
	InstanceID       int64          `json:"workflow_instance_id"`
	RunID            int64          `json:"workflow_run_id"`
	StepID           string         `json:"step_id"`
	AttemptID        *int64         `json:"step_attempt_id,omitempty"`
	StepRuntimeState *StepRuntime   `json:"step_runtime_state,omitempty"`
	TimelineEvent    *TimelineEvent `json:"timeline_event"`
}

// StepInstanceRestartResponse is Maestro's answer to a step restart.
type StepInstanceRestartResponse struct {
	WorkflowID    string         `json:"workflow_id"`
	VersionID     int64          `json:"workflow_version_id"`
	InstanceID    int64          `json:"workflow_instance_id"`
	RunID         int64          `json:"workflow_run_id"`
	StepID        string         `json:"step_id"`
	AttemptID     *int64         `json:"step_attempt_id,omitempty"`
	Status        string         `json:"status"`
	TimelineEvent *TimelineEvent `json:"timeline_event"`
}

// UpstreamInfo is Maestro's UpstreamInitiator.Info: one node of a path of
// runs (an ancestor of an inline run).
type UpstreamInfo struct {
	WorkflowID    string `json:"workflow_id"`
	InstanceID    int64  `json:"instance_id"`
	RunID         int64  `json:"run_id,omitempty"`
	StepID        string `json:"step_id,omitempty"`
	StepAttemptID int64  `json:"step_attempt_id,omitempty"`
}
