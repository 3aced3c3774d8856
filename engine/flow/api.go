package flow

import (
	"context"

	"github.com/maestro-aws/maestro/engine/flow/internal/composite"
	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// What the API and the other services use of the engine's store and of its
// composite runtimes, which live in internal packages
// (engine/flow/internal/flowstore, engine/flow/internal/composite).

// Ref names one run of a workflow instance.
type Ref = flowstore.Ref

// Parent identifies the step attempt that created a child run.
type Parent = flowstore.Parent

// Queue message payloads the engine handles.
type (
	// StartMessage is the payload of a start_workflow queue message.
	StartMessage = flowstore.StartMessage
	// ActionMessage is the payload of an instance_action queue message.
	ActionMessage = flowstore.ActionMessage
	// StepUpdateMessage is the payload of a step_update queue message.
	StepUpdateMessage = flowstore.StepUpdateMessage
)

// Action is an instance or step action the API asks for.
type Action = flowstore.Action

// Instance actions.
const (
	ActionStop = flowstore.ActionStop
	ActionKill = flowstore.ActionKill
)

// ErrFenced reports a write refused because this node no longer holds the
// generation of the flow's group: another node has taken the flow over.
var ErrFenced = flowstore.ErrFenced

// Run strategies (docs/run-control.md); see flowstore for the rules.
type (
	// Strategy is a workflow's effective run strategy.
	Strategy = flowstore.Strategy
	// Room is what admission reads of a workflow's runs.
	Room = flowstore.Room
	// Tx is what the run-control SQL needs: a transaction in practice.
	Tx = flowstore.Tx
	// Beginner starts transactions: a pool in practice.
	Beginner = flowstore.Beginner
)

// ErrWorkflowGone reports a workflow row that no longer exists.
var ErrWorkflowGone = flowstore.ErrWorkflowGone

// ParseStrategy reads the effective run strategy from a workflow's current
// properties; unset or unreadable means SEQUENTIAL.
func ParseStrategy(props []byte) Strategy { return flowstore.ParseStrategy(props) }

// LockWorkflow takes the admission lock of a workflow and returns its
// current properties (ErrWorkflowGone when the row is gone).
func LockWorkflow(ctx context.Context, tx Tx, workflowID string) ([]byte, error) {
	return flowstore.LockWorkflow(ctx, tx, workflowID)
}

// AdmitQueued admits the queued runs of a workflow its run strategy allows
// now and enqueues their start messages; the caller holds the workflow
// lock in tx.
func AdmitQueued(ctx context.Context, tx Tx, workflowID string, props []byte) ([]Ref, error) {
	return flowstore.AdmitQueued(ctx, tx, workflowID, props)
}

// RoomNow reports whether a new run may be admitted at once; the caller
// holds the workflow lock in tx.
func RoomNow(ctx context.Context, tx Tx, workflowID string, props []byte) (bool, error) {
	return flowstore.RoomNow(ctx, tx, workflowID, props)
}

// PrepareStart applies what a run strategy does to the runs already there
// when a new run is triggered; a non-empty drop means the new run must not
// run.
func PrepareStart(ctx context.Context, tx Tx, workflowID string, props []byte) (drop string, err error) {
	return flowstore.PrepareStart(ctx, tx, workflowID, props)
}

// AdmitWorkflow locks a workflow and admits, in its own transaction, what
// its strategy allows now.
func AdmitWorkflow(ctx context.Context, db Beginner, workflowID string, skipLocked bool) ([]Ref, error) {
	return flowstore.AdmitWorkflow(ctx, db, workflowID, skipLocked)
}

// Rooms reads the admission state of many workflows in one statement.
func Rooms(ctx context.Context, tx Tx, ids []string, strict []bool) (map[string]Room, error) {
	return flowstore.Rooms(ctx, tx, ids, strict)
}

// PrepareStarts is PrepareStart for many workflows at once.
func PrepareStarts(ctx context.Context, tx Tx, strategies map[string]Strategy) (map[string]string, error) {
	return flowstore.PrepareStarts(ctx, tx, strategies)
}

// DroppedRunEvent is the event of a run that ends as it is created because
// its run strategy dropped it; definition is the run's workflow JSON.
func DroppedRunEvent(ref Ref, definition []byte, uuid string, depth int, correlation string) event.Record {
	return flowstore.DroppedRunEvent(ref, definition, uuid, depth, correlation)
}

// DroppedRunEventOf is DroppedRunEvent for a definition already decoded.
func DroppedRunEventOf(ref Ref, wf *workflow.Workflow, uuid string, depth int, correlation string) event.Record {
	return flowstore.DroppedRunEventOf(ref, wf, uuid, depth, correlation)
}

// RootCorrelation is the correlation id of a run that has no parent.
func RootCorrelation(ref Ref) string { return flowstore.RootCorrelation(ref) }

// SkippedStepEvent is the event of a step recorded SKIPPED in a new run
// that a restart creates.
func SkippedStepEvent(ref Ref, wf *workflow.Workflow, runUUID, correlation, stepID string, attempt int64, stepUUID string, seq int64) event.Record {
	return flowstore.SkippedStepEvent(ref, wf, runUUID, correlation, stepID, attempt, stepUUID, seq)
}

// Limits of composite steps.
const (
	// MaxSubworkflowDepth is how many subworkflow steps may be nested.
	MaxSubworkflowDepth = composite.MaxSubworkflowDepth
	// MaxForeachIterations bounds the iterations of one foreach step.
	MaxForeachIterations = composite.MaxForeachIterations
	// DefaultForeachConcurrency is how many iterations run at once when
	// the step sets no concurrency.
	DefaultForeachConcurrency = composite.DefaultForeachConcurrency
	// MaxWhileIterations is the default iteration limit of a while step.
	MaxWhileIterations = composite.MaxWhileIterations
	// ParamMaxIterations is the while step param that sets its limit.
	ParamMaxIterations = composite.ParamMaxIterations
)

// Errors of params.getFromSubworkflow and params.getFromForeach.
var (
	ErrNoSubworkflowParam = composite.ErrNoSubworkflowParam
	ErrNoForeachParam     = composite.ErrNoForeachParam
)

// ForeachWorkflowID is the workflow id of the iterations of a foreach step
// of one parent instance.
func ForeachWorkflowID(workflowID string, instanceID int64, stepID string) string {
	return composite.ForeachWorkflowID(workflowID, instanceID, stepID)
}
