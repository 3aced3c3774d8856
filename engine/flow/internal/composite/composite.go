// Package composite holds the runtimes of the step types that run child
// runs on the engine itself: subworkflow (another workflow as a child run),
// while (an inline run per iteration, one after another) and foreach (an
// inline run per combination of loop params, many at once). Their calls
// only touch the database: each child is created in one transaction with
// the record of it on the parent attempt, fenced by the parent's
// generation, so a call repeated after a crash or a takeover finds what an
// earlier one created. See docs/subworkflow.md, docs/while.md and
// docs/foreach.md.
package composite

import (
	"encoding/json"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/authz"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Config is what the composite runtimes need of the engine node that runs
// them.
type Config struct {
	// DB is the engine's pool.
	DB *pgxpool.Pool
	// NodeID names the engine node: child runs are created only while it
	// owns the parent's flow group (fenceParent).
	NodeID string
	// Logger receives the transient failures a call retries.
	Logger *slog.Logger
	// Local, when set, starts child runs in flow groups this node holds
	// without the queue (local.go).
	Local Starter
	// Policy decides whether the owner of a parent workflow may start the
	// workflow a subworkflow step names, as the API decides a direct start.
	Policy authz.Policy
}

// host is one engine node's Config, shared by its composite runtimes.
type host struct{ Config }

// Step types (the runtime keys) of the composite steps.
const (
	SubworkflowType = subworkflowType
	WhileType       = whileType
	ForeachType     = foreachType
)

// Runtimes returns the composite runtimes by step type.
func Runtimes(cfg Config) map[string]stepruntime.Runtime {
	h := &host{cfg}
	return map[string]stepruntime.Runtime{
		subworkflowType: &subworkflowRuntime{h: h, defs: definition.NewStore(cfg.DB)},
		whileType:       &whileRuntime{h: h},
		foreachType:     &foreachRuntime{h: h},
	}
}

// StepConfig is what the step actor tells the runtime of a composite step
// (its Attempt.Config), nil for a leaf step; kill is set once the attempt
// is being killed, so that Terminate kills the children instead of
// stopping them.
func StepConfig(node *workflow.StepNode, kill bool) map[string]json.RawMessage {
	switch {
	case node.Subworkflow != nil:
		return subworkflowConfig(node.Subworkflow, kill)
	case node.While != nil:
		return whileConfig(node.While, kill)
	case node.Foreach != nil:
		return foreachConfig(node.Foreach, kill)
	}
	return nil
}
