package definition

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// lockFor locks the workflow row for the rest of tx and returns its state,
// once it knows the actor may change the workflow (what names the change in
// the refusal).
func lockFor(ctx context.Context, tx pgx.Tx, workflowID string, actor Actor, what string) (*wfState, error) {
	st, err := lock(ctx, tx, workflowID)
	if err != nil {
		return nil, err
	}
	if !actor.mayChange(st.owner) {
		return nil, forbidden(workflowID, st.owner, what)
	}
	return st, nil
}

// lock locks the workflow row for the rest of tx and returns its state.
func lock(ctx context.Context, tx pgx.Tx, workflowID string) (*wfState, error) {
	var st wfState
	err := tx.QueryRow(ctx, sqlLockWorkflow, workflowID).Scan(&st.latest, &st.active, &st.props, &st.propsVersion,
		&st.owner, &st.createdBy)
	if errNoRows(err) {
		return nil, fmt.Errorf("workflow %s does not exist: %w", workflowID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("lock workflow %s: %w", workflowID, err)
	}
	return &st, nil
}

func forbidden(workflowID, owner, what string) error {
	return fmt.Errorf("workflow %s is owned by %s; only the owner or an administrator may %s it: %w",
		workflowID, owner, what, ErrForbidden)
}

// PropertiesUpdate is what UpdateProperties did.
type PropertiesUpdate struct {
	Snapshot *Snapshot
	// New is false when the change left the properties as they were; the
	// current snapshot is returned instead of a new one.
	New bool
}

// UpdateProperties applies change to the workflow's properties as a new
// snapshot. Only the owner (properties.owner, else the creator) or an
// administrator may do it (ErrForbidden). A change that changes nothing
// adds no snapshot.
func (s *Store) UpdateProperties(ctx context.Context, workflowID string, change workflow.PropertiesChange, actor Actor) (*PropertiesUpdate, error) {
	var out *PropertiesUpdate
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		st, err := lockFor(ctx, tx, workflowID, actor, "change the properties of")
		if err != nil {
			return err
		}
		m, err := mergedProperties(st.props, change)
		if err != nil {
			return fmt.Errorf("workflow %s: %w", workflowID, err)
		}
		if st.propsVersion > 0 && string(m.canonical) == string(m.currentCanonical) {
			snap := &Snapshot{WorkflowID: workflowID, Version: st.propsVersion, Properties: st.props, Owner: st.owner}
			if err := tx.QueryRow(ctx, sqlSnapshotMeta, workflowID, st.propsVersion).Scan(&snap.Author, &snap.CreateTime); err != nil {
				return fmt.Errorf("read workflow %s properties snapshot %d: %w", workflowID, st.propsVersion, err)
			}
			out = &PropertiesUpdate{Snapshot: snap}
			return nil
		}
		snap := &Snapshot{WorkflowID: workflowID, Version: st.propsVersion + 1, Properties: m.json, Author: actor.Who(),
			Owner: m.owner(st.createdBy)}
		b := &pgx.Batch{}
		queueSnapshot(b, snap, m.owner(st.createdBy))
		queueTimeline(b, workflowID, timelineEntry{Type: EventUpdateProperties, Author: actor.Who(), SnapshotVersion: snap.Version,
			Message: fmt.Sprintf("added properties snapshot %d", snap.Version)})
		queuePropertiesEvent(b, workflowID, actor.Who(), snap.Version)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("store workflow %s properties snapshot %d: %w", workflowID, snap.Version, err)
		}
		if err := syncTriggers(ctx, tx, workflowID); err != nil {
			return err
		}
		out = &PropertiesUpdate{Snapshot: snap, New: true}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Activation is what Activate or Deactivate did.
type Activation struct {
	WorkflowID string `json:"workflow_id"`
	// ActiveVersion is the active version now, nil when none is.
	ActiveVersion *int64 `json:"active_version_id"`
	// PreviousActiveVersion was the active version before.
	PreviousActiveVersion *int64 `json:"previous_active_version_id"`
	// Changed is false when the version was already active (or the
	// workflow already inactive).
	Changed bool `json:"changed"`
}

// Activate makes the version named by selector (a number, latest, active or
// default) the workflow's active version: the one triggers start and the
// default for starts that name none.
func (s *Store) Activate(ctx context.Context, workflowID, selector string, actor Actor) (*Activation, error) {
	sel, err := workflow.ParseVersionSelector(selector)
	if err != nil {
		return nil, err
	}
	var out *Activation
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		st, err := lockFor(ctx, tx, workflowID, actor, "activate a version of")
		if err != nil {
			return err
		}
		var version int64
		switch {
		case sel.N > 0:
			var exists bool
			if err := tx.QueryRow(ctx, sqlVersionExists, workflowID, sel.N).Scan(&exists); err != nil {
				return fmt.Errorf("read workflow %s version %d: %w", workflowID, sel.N, err)
			}
			if !exists {
				return fmt.Errorf("workflow %s has no version %d: %w", workflowID, sel.N, ErrNotFound)
			}
			version = sel.N
		case sel.Name == "latest":
			version = st.latest
		case st.active != nil:
			version = *st.active
		case sel.Name == "active":
			return fmt.Errorf("workflow %s has no active version: %w", workflowID, ErrNotFound)
		default:
			version = st.latest
		}
		out = &Activation{WorkflowID: workflowID, ActiveVersion: &version, PreviousActiveVersion: st.active}
		if st.active != nil && *st.active == version {
			return nil
		}
		out.Changed = true
		if _, err := tx.Exec(ctx, sqlSetActive, workflowID, version, actor.Who()); err != nil {
			return fmt.Errorf("activate workflow %s version %d: %w", workflowID, version, err)
		}
		if err := syncTriggers(ctx, tx, workflowID); err != nil {
			return err
		}
		if err := addActivationEvent(ctx, tx, workflowID, actor.Who(), &version, st.active); err != nil {
			return err
		}
		return addTimeline(ctx, tx, workflowID, timelineEntry{Type: EventActivate, Author: actor.Who(), Version: version,
			Message: fmt.Sprintf("activated version %d", version)})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Deactivate leaves the workflow without an active version: its triggers
// stop starting it, while explicit starts of a version still work.
func (s *Store) Deactivate(ctx context.Context, workflowID string, actor Actor) (*Activation, error) {
	var out *Activation
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		st, err := lockFor(ctx, tx, workflowID, actor, "deactivate")
		if err != nil {
			return err
		}
		out = &Activation{WorkflowID: workflowID, PreviousActiveVersion: st.active}
		if st.active == nil {
			return nil
		}
		out.Changed = true
		if _, err := tx.Exec(ctx, sqlSetActive, workflowID, nil, actor.Who()); err != nil {
			return fmt.Errorf("deactivate workflow %s: %w", workflowID, err)
		}
		if err := syncTriggers(ctx, tx, workflowID); err != nil {
			return err
		}
		if err := addActivationEvent(ctx, tx, workflowID, actor.Who(), nil, st.active); err != nil {
			return err
		}
		return addTimeline(ctx, tx, workflowID, timelineEntry{Type: EventDeactivate, Author: actor.Who(), Version: *st.active,
			Message: fmt.Sprintf("deactivated the workflow (version %d was active)", *st.active)})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
