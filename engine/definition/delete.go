package definition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/queue"
)

// Deletion is what Delete did.
type Deletion struct {
	WorkflowID string `json:"workflow_id"`
	// Status is DELETED when everything is gone, DELETING when the
	// instances are being removed by the DeleteWorkflow queue.
	Status string `json:"status"`
	// DeletedRuns is how many instance runs were deleted inline.
	DeletedRuns int64 `json:"deleted_instance_runs"`
	// DeletionID names the queued deletion.
	DeletionID string `json:"deletion_id,omitempty"`
}

// Deletion statuses.
const (
	StatusDeleted  = "DELETED"
	StatusDeleting = "DELETING"
)

// DeletePayload is the DeleteWorkflow queue message ProcessDelete handles.
type DeletePayload struct {
	WorkflowID string `json:"workflow_id"`
	DeletionID string `json:"deletion_id"`
}

// ErrBadPayload reports a queue message ProcessDelete can never process;
// the handler should log and drop it rather than retry.
var ErrBadPayload = errors.New("malformed delete message")

// Delete removes the workflow: versions, properties snapshots and its
// instances with their steps, and records the deletion in the timeline.
// Only the owner or an administrator may do it (ErrForbidden), and not
// while a run is CREATED, IN_PROGRESS or PAUSED (ErrConflict: stop or kill
// them first).
//
// With at most the inline limit of instance runs everything is deleted in
// one transaction. Otherwise the definition rows are deleted and a
// DeleteWorkflow message is enqueued in the same transaction; ProcessDelete
// then removes the instances in batches. Until it is done the workflow id
// cannot be pushed again (ErrDeleting).
func (s *Store) Delete(ctx context.Context, workflowID string, actor Actor) (*Deletion, error) {
	var out *Deletion
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		st, err := lockFor(ctx, tx, workflowID, actor, "delete")
		if err != nil {
			return err
		}
		var live int64
		if err := tx.QueryRow(ctx, sqlLiveInstances, workflowID).Scan(&live); err != nil {
			return fmt.Errorf("count workflow %s live runs: %w", workflowID, err)
		}
		if live > 0 {
			return fmt.Errorf("workflow %s has %d runs that are CREATED, IN_PROGRESS or PAUSED; stop or kill them first: %w",
				workflowID, live, ErrConflict)
		}
		var runs int64
		if err := tx.QueryRow(ctx, sqlCountInstancesUpTo, workflowID, s.inlineDeleteLimit+1).Scan(&runs); err != nil {
			return fmt.Errorf("count workflow %s runs: %w", workflowID, err)
		}
		out = &Deletion{WorkflowID: workflowID, Status: StatusDeleted}
		event := timelineEntry{Type: EventDelete, Author: actor.Who(), Details: map[string]any{}}
		if runs <= int64(s.inlineDeleteLimit) {
			if err := tx.QueryRow(ctx, sqlDeleteInstances, workflowID).Scan(&out.DeletedRuns); err != nil {
				return fmt.Errorf("delete workflow %s instances: %w", workflowID, err)
			}
			event.Message = fmt.Sprintf("deleted the workflow: %d versions and %d instance runs", st.latest, out.DeletedRuns)
		} else {
			out.Status = StatusDeleting
			if err := tx.QueryRow(ctx, sqlInsertDeletion, workflowID, actor.Who()).Scan(&out.DeletionID); err != nil {
				return fmt.Errorf("record workflow %s deletion: %w", workflowID, err)
			}
			if _, err := queue.Enqueue(ctx, tx, queue.DeleteWorkflow, queue.AnyGroup,
				DeletePayload{WorkflowID: workflowID, DeletionID: out.DeletionID}); err != nil {
				return fmt.Errorf("enqueue workflow %s deletion: %w", workflowID, err)
			}
			event.Message = fmt.Sprintf("deleted the workflow's %d versions; its more than %d instance runs are being deleted",
				st.latest, s.inlineDeleteLimit)
			event.Details["deletion_id"] = out.DeletionID
		}
		event.Details["versions"] = st.latest
		event.Details["status"] = out.Status
		if err := addDeletionEvent(ctx, tx, workflowID, actor.Who()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlDeleteWorkflow, workflowID); err != nil {
			return fmt.Errorf("delete workflow %s: %w", workflowID, err)
		}
		return addTimeline(ctx, tx, workflowID, event)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ProcessDelete handles a DeleteWorkflow queue message: it removes the
// deleted workflow's instance runs (and their steps) in batches of their own
// transactions, then marks the deletion done, which lets the id be pushed
// again. It is idempotent: a repeated or concurrent delivery of a message
// whose deletion is done does nothing, and a delivery interrupted halfway
// continues where the last one stopped.
func (s *Store) ProcessDelete(ctx context.Context, payload []byte) error {
	var p DeletePayload
	if err := json.Unmarshal(payload, &p); err != nil || p.WorkflowID == "" || uuid.Validate(p.DeletionID) != nil {
		return fmt.Errorf("%w: %q", ErrBadPayload, payload)
	}
	var pending bool
	if err := s.db.QueryRow(ctx, sqlDeletionPending, p.WorkflowID, p.DeletionID).Scan(&pending); err != nil {
		return fmt.Errorf("read workflow %s deletion: %w", p.WorkflowID, err)
	}
	if !pending {
		return nil
	}
	var total int64
	for {
		var n int64
		if err := s.db.QueryRow(ctx, sqlDeleteInstanceBatch, p.WorkflowID, s.deleteBatchSize).Scan(&n); err != nil {
			return fmt.Errorf("delete workflow %s instances: %w", p.WorkflowID, err)
		}
		total += n
		if n < int64(s.deleteBatchSize) {
			break
		}
	}
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sqlFinishDeletion, p.WorkflowID, p.DeletionID)
		if err != nil {
			return fmt.Errorf("finish workflow %s deletion: %w", p.WorkflowID, err)
		}
		if tag.RowsAffected() == 0 {
			return nil // a concurrent delivery finished it
		}
		return addTimeline(ctx, tx, p.WorkflowID, timelineEntry{Type: EventDeleteCompleted, Author: "maestro",
			Message: "deleted the workflow's remaining instance runs",
			Details: map[string]any{"deletion_id": p.DeletionID, "deleted_instance_runs": total}})
	})
}
