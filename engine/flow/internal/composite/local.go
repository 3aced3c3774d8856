package composite

import (
	"context"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Local starts (docs/foreach.md, "Starting iterations on this node").
//
// An iteration whose flow group this node holds is created IN_PROGRESS,
// stamped with the group's generation, in the transaction that creates its
// batch, and its flow is started in memory once that transaction has
// committed. The queue round trip of a start (the message, its claim and
// delete, re-reading the row, moving it to IN_PROGRESS) is skipped. Nothing
// is lost on a crash: an IN_PROGRESS run belongs to its group, so whoever
// adopts the group next runs it from its first step, as it does any run
// that had not written a step yet. An iteration in a group the node does
// not hold, or one whose fence fails when the batch is written, is created
// CREATED with a start message, as before.

// Starter is what the engine node offers the composite runtimes for
// starting child runs without the queue. A nil Starter sends every start
// through the queue.
type Starter interface {
	// Held returns the generation under which this node holds flow group
	// g; ok is false when it does not hold it or is handing it over.
	Held(g int32) (gen int64, ok bool)
	// Prepare evaluates the params of runs about to be created
	// IN_PROGRESS and builds their CREATED -> IN_PROGRESS events (nil when
	// the node records no events), one Prepared per run in order. The runs
	// share their definition, owner, correlation, depth, run id, the type
	// of their initiator and their RunParams; each has its Own params,
	// named in varying (a foreach's loop params and loop_index): what the
	// runs share is evaluated once. A run whose Prepared has an error is
	// left to the queue, whose start reports it on the run.
	Prepare(ctx context.Context, runs []NewRun, varying []string) []Prepared
	// Run starts the flows of runs committed IN_PROGRESS under gen of
	// their group. A run whose group the node no longer holds at that
	// generation is left to the group's next owner, which adopts it.
	Run(ctx context.Context, runs []StartedRun)
}

// NewRun is a run about to be created.
type NewRun struct {
	Ref        run.Ref
	Definition []byte
	// RunParams are the run params the runs share (not to be changed),
	// Own this run's, which replace those of the same name: the run's run
	// params are both.
	RunParams workflow.Params
	Own       workflow.Params
	// Initiator is the JSON of the run's initiator column.
	Initiator []byte
	Owner     string
	// UUID, Correlation and Depth are what the run's events carry.
	UUID        string
	Correlation string
	Depth       int
}

// Prepared is a run's evaluated params (as the flow takes them, and as
// JSON for its row) and its start event, or why they could not be made.
type Prepared struct {
	Values params.Values
	// JSON is the run's params; Base, when set, an object of params the
	// batch's runs share (one slice for all) that JSON extends, with no
	// name in both: the stored params are both (run.Local.ParamsBase).
	JSON  []byte
	Base  []byte
	Event []byte
	Err   error
}

// StartedRun is a run committed IN_PROGRESS by this node.
type StartedRun struct {
	Row        flowstore.InstanceRow
	Generation int64
	Values     params.Values
	// Event is the start event written with the run, nil for none.
	Event []byte
	// ParamsBase is the shared part of the run's params that Row.Params
	// (its own part) extends, nil for none (Prepared.Base).
	ParamsBase []byte
}
