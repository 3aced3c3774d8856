package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// checkSubworkflowTargets refuses a push whose subworkflow steps start a
// workflow the pushed workflow's owner may not start directly: a step
// acts for its workflow's owner (docs/security.md, "Runs started by
// steps"). The engine checks again when it creates the child; this check
// answers the pusher at once. A target that does not exist yet has no
// owner and passes.
func (s *Server) checkSubworkflowTargets(ctx context.Context, d *workflow.Definition, actor definition.Actor) error {
	targets := d.Workflow.SubworkflowTargets()
	if len(targets) == 0 {
		return nil
	}
	owner, err := s.ownerAfterPush(ctx, d, actor)
	if err != nil {
		return err
	}
	var denied []string
	for _, t := range targets {
		if t.WorkflowID == d.Workflow.ID {
			continue // the workflow's own owner
		}
		target, err := s.cfg.Definitions.Access(ctx, t.WorkflowID)
		if errors.Is(err, definition.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("check subworkflow step %s: %w", t.StepID, err)
		}
		// Starting a run is an operator's action (access_control.operators).
		err = s.policy.Decide(owner, authz.Operator, authz.Target{Kind: "workflow", ID: t.WorkflowID, Exists: true,
			Owner: target.Owner, Operators: target.Operators})
		if err != nil {
			denied = append(denied, fmt.Sprintf("workflow.steps%s (%s): starts workflow %s, owned by %s, which %s (the owner of %s) may not start",
				t.Path, t.StepID, t.WorkflowID, target.Owner, owner, d.Workflow.ID))
		}
	}
	if len(denied) > 0 {
		e := forbidden(fmt.Sprintf("a subworkflow step of %s starts a workflow its owner %s may not start directly", d.Workflow.ID, owner))
		e.Details = denied
		return e
	}
	return nil
}

// ownerAfterPush is who owns d's workflow once the push is stored: the
// owner it names, else the current owner, else the pusher.
func (s *Server) ownerAfterPush(ctx context.Context, d *workflow.Definition, actor definition.Actor) (string, error) {
	if d.Properties != nil && d.Properties.Owner != nil && d.Properties.Owner.Name != "" {
		return d.Properties.Owner.Name, nil
	}
	owner, err := s.cfg.Definitions.Owner(ctx, d.Workflow.ID)
	switch {
	case errors.Is(err, definition.ErrNotFound):
		return actor.Who(), nil
	case err != nil:
		return "", fmt.Errorf("read the owner of %s: %w", d.Workflow.ID, err)
	}
	return owner, nil
}
