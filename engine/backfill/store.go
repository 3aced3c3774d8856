package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// errDuplicate rolls back a creation whose request id committed meanwhile.
var errDuplicate = errors.New("backfill request id used meanwhile")

// MaxConcurrency is the most runs a backfill may keep in flight.
const MaxConcurrency = 1000

// CreateRequest is a backfill to create.
type CreateRequest struct {
	WorkflowID string
	// Version selects the version to run: "active" (also ""), "latest"
	// or a number.
	Version string
	Param   string
	Spec    Spec
	// Concurrency is the most runs in flight; 0 means 1.
	Concurrency int
	Downstream  bool
	Rerun       bool
	// RequestID makes the creation idempotent per workflow.
	RequestID string
	Caller    string
}

// Create stores a backfill with its partitions and returns it; the driver
// starts its runs. A request id the workflow used already returns that
// backfill with duplicate set.
func (s *Store) Create(ctx context.Context, req CreateRequest) (b *Backfill, duplicate bool, err error) {
	if req.Concurrency < 0 || req.Concurrency > MaxConcurrency {
		return nil, false, invalid("concurrency must be from 1 to %d", MaxConcurrency)
	}
	if len(req.RequestID) > 128 {
		return nil, false, invalid("request_id is at most 128 characters")
	}
	if req.Spec.Incremental != nil {
		if req.Concurrency == 0 {
			req.Concurrency = 1
		}
		if req.RequestID != "" {
			if b, err := s.byRequest(ctx, req.WorkflowID, req.RequestID); err == nil || !errors.Is(err, ErrNotFound) {
				return b, err == nil, err
			}
		}
		return s.createIncremental(ctx, req)
	}
	if req.Param == "" || len(req.Param) > 128 {
		return nil, false, invalid("param is required, at most 128 characters")
	}
	if req.Concurrency == 0 {
		req.Concurrency = 1
	}
	if req.Concurrency < 0 || req.Concurrency > MaxConcurrency {
		return nil, false, invalid("concurrency must be from 1 to %d", MaxConcurrency)
	}
	if len(req.RequestID) > 128 {
		return nil, false, invalid("request_id is at most 128 characters")
	}
	if req.RequestID != "" {
		if b, err := s.byRequest(ctx, req.WorkflowID, req.RequestID); err == nil || !errors.Is(err, ErrNotFound) {
			return b, err == nil, err
		}
	}
	v, err := s.defs.Get(ctx, req.WorkflowID, req.Version)
	if err != nil {
		return nil, false, fmt.Errorf("backfill of workflow %s: %w", req.WorkflowID, err)
	}
	format, values, err := req.Spec.Expand()
	if err != nil {
		return nil, false, err
	}
	pt, err := ParamType(&v.Workflow, req.Param, format)
	if err != nil {
		return nil, false, err
	}
	// The runs' params must pass the version's param checks (a constant
	// param cannot be set, ...): checked once here, not once per run.
	first, err := ParamValue(pt, values[0])
	if err != nil {
		return nil, false, err
	}
	if _, err := params.WorkflowDefs(params.WorkflowInput{Workflow: &v.Workflow,
		RunParams: workflow.Params{req.Param: first}, Phase: params.PhaseStart}); err != nil {
		return nil, false, invalid("param %s cannot be set on a run of %s version %d: %v", req.Param, v.WorkflowID, v.Version, err)
	}
	spec := req.Spec
	spec.Format = format
	if spec.Order == "" {
		spec.Order = OrderOldest
	}
	rawSpec, err := json.Marshal(spec)
	if err != nil {
		return nil, false, fmt.Errorf("encode backfill spec: %w", err)
	}
	id := uuid.NewString()
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sqlInsert, id, v.WorkflowID, v.Version, req.Param, string(pt), format, rawSpec,
			req.Concurrency, req.Downstream, req.Rerun, req.RequestID, req.Caller, len(values))
		if err != nil {
			return fmt.Errorf("insert backfill of %s: %w", v.WorkflowID, err)
		}
		if tag.RowsAffected() == 0 {
			duplicate = true // the same request id committed meanwhile
			return nil
		}
		if _, err := tx.Exec(ctx, sqlInsertPartitions, id, values); err != nil {
			return fmt.Errorf("insert %d partitions of backfill %s: %w", len(values), id, err)
		}
		if b, err = scanBackfill(tx.QueryRow(ctx, sqlGet, id)); err != nil {
			return err
		}
		return writeEvent(ctx, tx, b, "", req.Caller)
	})
	if err != nil {
		return nil, false, err
	}
	if duplicate {
		b, err = s.byRequest(ctx, req.WorkflowID, req.RequestID)
		return b, true, err
	}
	return b, false, nil
}

func (s *Store) byRequest(ctx context.Context, workflowID, requestID string) (*Backfill, error) {
	b, err := scanBackfill(s.db.QueryRow(ctx, sqlByRequest, workflowID, requestID))
	if err != nil {
		return nil, fmt.Errorf("backfill of %s with request id %s: %w", workflowID, requestID, err)
	}
	return b, nil
}

type rowScanner interface {
	Scan(dest ...any) error
}

func scanBackfill(row rowScanner) (*Backfill, error) {
	var b Backfill
	var spec []byte
	var pt, status string
	err := row.Scan(&b.ID, &b.WorkflowID, &b.Version, &b.Param, &pt, &b.Format, &spec, &b.Concurrency,
		&b.Downstream, &b.Rerun, &status, &b.RequestID, &b.CreatedBy, &b.Partitions, &b.CreateTime, &b.ModifyTime, &b.EndTime)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read backfill: %w", err)
	}
	b.ParamType, b.Status = workflow.ParamType(pt), Status(status)
	if err := json.Unmarshal(spec, &b.Spec); err != nil {
		return nil, fmt.Errorf("decode spec of backfill %s: %w", b.ID, err)
	}
	return &b, nil
}

// Get returns a backfill with its partitions, their counts and its
// downstream runs.
func (s *Store) Get(ctx context.Context, id string) (*Detail, error) {
	b, err := s.Backfill(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &Detail{Backfill: *b, Counts: map[string]int{}, Partitions: make([]Partition, 0, b.Partitions),
		Downstream: map[string]*Downstream{}}
	rows, err := s.db.Query(ctx, sqlPartitions, id, b.WorkflowID)
	if err != nil {
		return nil, fmt.Errorf("read partitions of backfill %s: %w", id, err)
	}
	for rows.Next() {
		var p Partition
		var state string
		var runStatus *string
		if err := rows.Scan(&p.Seq, &p.Value, &state, &p.InstanceID, &p.Attempt, &p.RunID, &runStatus); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read partitions of backfill %s: %w", id, err)
		}
		p.Status = state
		if runStatus != nil && state != StateSkipped {
			p.Status = *runStatus
		}
		d.Counts[p.Status]++
		d.Partitions = append(d.Partitions, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read partitions of backfill %s: %w", id, err)
	}
	rows, err = s.db.Query(ctx, sqlDownstream, id, b.WorkflowID)
	if err != nil {
		return nil, fmt.Errorf("read downstream runs of backfill %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var wf string
		var r Run
		if err := rows.Scan(&wf, &r.InstanceID, &r.RunID, &r.Status); err != nil {
			return nil, fmt.Errorf("read downstream runs of backfill %s: %w", id, err)
		}
		ds := d.Downstream[wf]
		if ds == nil {
			ds = &Downstream{Counts: map[string]int{}}
			d.Downstream[wf] = ds
		}
		ds.Runs = append(ds.Runs, r)
		ds.Counts[r.Status]++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read downstream runs of backfill %s: %w", id, err)
	}
	return d, nil
}

// Backfill returns a backfill without its partitions.
func (s *Store) Backfill(ctx context.Context, id string) (*Backfill, error) {
	b, err := scanBackfill(s.db.QueryRow(ctx, sqlGet, id))
	if err != nil {
		return nil, fmt.Errorf("backfill %s: %w", id, err)
	}
	return b, nil
}

// List returns a workflow's backfills, newest first, at most limit.
func (s *Store) List(ctx context.Context, workflowID string, limit int) ([]*Backfill, error) {
	rows, err := s.db.Query(ctx, sqlList, workflowID, limit)
	if err != nil {
		return nil, fmt.Errorf("list backfills of %s: %w", workflowID, err)
	}
	defer rows.Close()
	out := []*Backfill{}
	for rows.Next() {
		b, err := scanBackfill(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list backfills of %s: %w", workflowID, err)
	}
	return out, nil
}

// Act applies an action to a backfill and returns it as it is now. Pause
// stops starting partitions (runs in flight go on); resume starts them
// again; cancel ends the partitions not ended and asks the engine to stop
// the backfill's runs in flight (and, with downstream, the runs its
// signals started); retry makes the FAILED and STOPPED partitions pending
// again. All of it is one transaction.
func (s *Store) Act(ctx context.Context, id string, action Action, caller string) (*Backfill, error) {
	var out *Backfill
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		b, err := scanBackfill(tx.QueryRow(ctx, sqlLock, id))
		if err != nil {
			return fmt.Errorf("backfill %s: %w", id, err)
		}
		to, err := Next(b.Status, action)
		if err != nil {
			return err
		}
		switch action {
		case ActionCancel:
			if err := stopRuns(ctx, tx, b, "backfill "+b.ID+" cancelled by "+caller); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, sqlCancelPartitions, id); err != nil {
				return fmt.Errorf("cancel partitions of backfill %s: %w", id, err)
			}
		case ActionRetry:
			if _, err := tx.Exec(ctx, sqlRetryPartitions, id); err != nil {
				return fmt.Errorf("retry partitions of backfill %s: %w", id, err)
			}
		}
		if to != b.Status || action == ActionRetry {
			if _, err := tx.Exec(ctx, sqlSetStatus, id, string(to)); err != nil {
				return fmt.Errorf("set backfill %s %s: %w", id, to, err)
			}
		}
		if out, err = scanBackfill(tx.QueryRow(ctx, sqlGet, id)); err != nil {
			return err
		}
		if to != b.Status || action == ActionRetry {
			return writeEvent(ctx, tx, out, b.Status, caller)
		}
		return nil
	})
	return out, err
}

// stopRuns asks the engine to stop the live runs the backfill caused.
func stopRuns(ctx context.Context, tx pgx.Tx, b *Backfill, reason string) error {
	rows, err := tx.Query(ctx, sqlLiveRuns, b.ID, b.WorkflowID, b.Downstream)
	if err != nil {
		return fmt.Errorf("list live runs of backfill %s: %w", b.ID, err)
	}
	var groups []int32
	var msgs []run.ActionMessage
	for rows.Next() {
		var m run.ActionMessage
		if err := rows.Scan(&m.Ref.WorkflowID, &m.Ref.InstanceID, &m.Ref.RunID, &m.Group); err != nil {
			rows.Close()
			return fmt.Errorf("list live runs of backfill %s: %w", b.ID, err)
		}
		m.Action, m.Reason = run.ActionStop, reason
		groups, msgs = append(groups, m.Group), append(msgs, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list live runs of backfill %s: %w", b.ID, err)
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := queue.EnqueueBatch(ctx, tx, queue.InstanceAction, groups, msgs); err != nil {
		return fmt.Errorf("stop %d runs of backfill %s: %w", len(msgs), b.ID, err)
	}
	return nil
}
