package execution

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// The batch start path: many starts in one transaction, with a handful of
// multi-row statements whatever their number, and every rule of a single
// Start (request-id dedup, param mode checks, run strategies and
// admission). Time triggers start their runs through it, and signal
// triggers will; a test checks that it and Start give the same result.

// BatchStart is one start of a batch: a run of a workflow version.
type BatchStart struct {
	WorkflowID string
	// Version is the version to run (a trigger's is the active version).
	Version int64
	// RequestID makes the start idempotent, as for Start; empty means none.
	RequestID string
	Initiator map[string]any
	RunParams workflow.Params
	// Authorize, when set, decides whether the start's caller may start a
	// run of the workflow, given its owner and operators as locked (see
	// StartRequest.Authorize); a refusal is the start's Err (a
	// DeniedError) and the other starts go on.
	Authorize func(owner string, operators []string) error
}

// DeniedError is a batch start's Err when its Authorize refused it.
type DeniedError struct{ Err error }

func (e *DeniedError) Error() string { return e.Err.Error() }

// Unwrap returns Authorize's error.
func (e *DeniedError) Unwrap() error { return e.Err }

// BatchResult is what became of one start of a batch.
type BatchResult struct {
	WorkflowID string
	InstanceID int64
	// RunID, UUID, GroupID and StartTime are the created run's (for a
	// duplicate, RunID 1 and the first run's uuid and group).
	RunID     int64
	UUID      string
	GroupID   int32
	StartTime *time.Time
	// Status is CREATED, or STOPPED for a run its FIRST_ONLY strategy
	// dropped; for a duplicate, the first run's status.
	Status instance.WorkflowStatus
	// Queued: the run waits for its run strategy to admit it.
	Queued     bool
	Duplicated bool
	// Err is why this start did not happen (ErrNotFound, ErrInvalid); the
	// other starts of the batch are not affected.
	Err error
}

// StartBatch applies starts in order in one transaction, as if each were
// a Start, and returns one result per start.
func (s *Service) StartBatch(ctx context.Context, starts []BatchStart) ([]BatchResult, error) {
	var out []BatchResult
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		out, err = s.StartBatchTx(ctx, tx, starts)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.AfterBatch(ctx, out)
	return out, nil
}

// AfterBatch does what a start does once its transaction has committed:
// admission runs again for each workflow whose new run was queued (see
// run.AdmitAfterCommit). A caller of StartBatchTx calls it after its commit.
func (s *Service) AfterBatch(ctx context.Context, results []BatchResult) {
	seen := map[string]bool{}
	for _, r := range results {
		if r.Queued && !r.Duplicated && r.Err == nil && !seen[r.WorkflowID] {
			seen[r.WorkflowID] = true
			_, _ = run.AdmitWorkflow(ctx, s.db, r.WorkflowID, false)
		}
	}
}

// batchVersion is what the batch path reads of a workflow version: its
// decoded definition (params, timeout), shared with Start's cache
// (startDefinitions), so that it is decoded once per version, not per
// batch.
type batchVersion struct {
	wf *workflow.Workflow
}

// batchVersionsSQL reads the fingerprints of the versions $1/$2, and the
// definitions of those whose fingerprint is not the one cached ($3).
const batchVersionsSQL = `
SELECT v.workflow_id, v.version, v.fingerprint, CASE WHEN v.fingerprint = k.known THEN NULL ELSE v.definition END
FROM unnest($1::text[], $2::bigint[], $3::bytea[]) AS k(id, version, known)
JOIN workflow_version v ON v.workflow_id = k.id AND v.version = k.version`

// batchLockSQL locks the workflows of a batch, in id order so that batches
// of overlapping workflows cannot deadlock, and reads their properties.
const batchLockSQL = `
SELECT workflow_id, properties, owner, properties->'access_control'->'operators'
FROM workflow WHERE workflow_id = ANY($1::text[])
ORDER BY workflow_id FOR NO KEY UPDATE`

// StartBatchTx applies starts in order inside tx, as if each were a Start,
// and returns one result per start. The caller commits tx and then calls
// AfterBatch. It takes the lock of every workflow of the batch (in id
// order), so the caller may hold some of them already.
func (s *Service) StartBatchTx(ctx context.Context, tx pgx.Tx, starts []BatchStart) ([]BatchResult, error) {
	out := make([]BatchResult, len(starts))
	if len(starts) == 0 {
		return out, nil
	}
	for i, st := range starts {
		out[i].WorkflowID = st.WorkflowID
	}
	versions, err := s.batchVersions(ctx, tx, starts)
	if err != nil {
		return nil, err
	}
	if lockAllocatable(starts) {
		return s.startBatchAllocated(ctx, tx, starts, versions, out)
	}
	props, access, err := lockBatch(ctx, tx, starts)
	if err != nil {
		return nil, err
	}
	// The workflow and version of each start exist; run.Create does the
	// rest of what Start does (dedup, param checks, admission).
	runs := make([]run.New, 0, len(starts))
	index := make([]int, 0, len(starts)) // start of each run
	timelines := map[string][]instance.TimelineEvent{}
	for i, st := range starts {
		v, ok := versions[batchKey{st.WorkflowID, st.Version}]
		if _, exists := props[st.WorkflowID]; !ok || !exists {
			out[i].Err = fmt.Errorf("workflow %s version %d: %w", st.WorkflowID, st.Version, ErrNotFound)
			continue
		}
		if st.Authorize != nil {
			a := access[st.WorkflowID]
			if err := st.Authorize(a.owner, workflow.Operators(a.operators)); err != nil {
				out[i].Err = &DeniedError{Err: err}
				continue
			}
		}
		runParams, initiator := st.RunParams, st.Initiator
		runs = append(runs, run.New{Ref: run.Ref{WorkflowID: st.WorkflowID}, Version: st.Version, RequestID: st.RequestID,
			Workflow: v.wf, GroupCount: s.groupCount,
			Check: func(n *run.New) error {
				if err := startInputs(n, runParams, initiator); err != nil {
					return err
				}
				shareTimeline(n, timelines)
				return nil
			}})
		index = append(index, i)
	}
	created, err := run.Create(ctx, tx, runs, run.Options{Props: props})
	if err != nil {
		return nil, err
	}
	for k, c := range created {
		i := index[k]
		if c.Err != nil {
			if !errors.Is(c.Err, ErrInvalid) {
				return nil, c.Err
			}
			out[i].Err = c.Err
			continue
		}
		out[i] = BatchResult{WorkflowID: c.Ref.WorkflowID, InstanceID: c.Ref.InstanceID, RunID: c.Ref.RunID, UUID: c.UUID,
			GroupID: c.GroupID, StartTime: c.StartTime, Status: c.Status, Queued: c.Queued, Duplicated: c.Duplicated}
	}
	return out, nil
}

// lockAllocatable reports whether a batch may allocate its instance ids
// when it locks its workflows (startBatchAllocated): no start may then
// turn out not to be created, which a request id (a duplicate) or an
// authorization (a refusal) could do.
func lockAllocatable(starts []BatchStart) bool {
	for _, st := range starts {
		if st.RequestID != "" || st.Authorize != nil {
			return false
		}
	}
	return true
}

// startBatchAllocated is StartBatchTx for a batch without request ids or
// authorizations: each start's inputs are checked first, and then one
// statement locks the workflows and allocates the ids of the starts that
// will be created (run.LockAllocate), where the general path locks in one
// statement and allocates in another, in Create.
func (s *Service) startBatchAllocated(ctx context.Context, tx pgx.Tx, starts []BatchStart, versions map[batchKey]*batchVersion, out []BatchResult) ([]BatchResult, error) {
	runs := make([]run.New, 0, len(starts))
	index := make([]int, 0, len(starts)) // start of each run
	counts := map[string]int64{}
	timelines := map[string][]instance.TimelineEvent{}
	for i, st := range starts {
		v, ok := versions[batchKey{st.WorkflowID, st.Version}]
		if !ok {
			out[i].Err = fmt.Errorf("workflow %s version %d: %w", st.WorkflowID, st.Version, ErrNotFound)
			continue
		}
		n := run.New{Ref: run.Ref{WorkflowID: st.WorkflowID}, Version: st.Version, Workflow: v.wf, GroupCount: s.groupCount}
		if err := startInputs(&n, st.RunParams, st.Initiator); err != nil {
			if !errors.Is(err, ErrInvalid) {
				return nil, err
			}
			out[i].Err = err
			continue
		}
		shareTimeline(&n, timelines)
		runs, index = append(runs, n), append(index, i)
		counts[st.WorkflowID]++
	}
	ids := make([]string, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ns := make([]int64, len(ids))
	for k, id := range ids {
		ns[k] = counts[id]
	}
	locks, err := run.LockAllocate(ctx, tx, ids, ns)
	if err != nil {
		return nil, err
	}
	props := make(map[string][]byte, len(locks))
	next := make(map[string]int64, len(locks))
	for id, l := range locks {
		props[id], next[id] = l.Props, l.Last-counts[id]+1
	}
	kept, keptIndex := runs[:0], index[:0]
	for k, n := range runs {
		first, ok := next[n.Ref.WorkflowID]
		if !ok { // deleted since its version was read
			out[index[k]].Err = fmt.Errorf("workflow %s version %d: %w", n.Ref.WorkflowID, n.Version, ErrNotFound)
			continue
		}
		n.Ref.InstanceID, next[n.Ref.WorkflowID] = first, first+1
		kept, keptIndex = append(kept, n), append(keptIndex, index[k])
	}
	created, err := run.Create(ctx, tx, kept, run.Options{Props: props, Deduplicated: true})
	if err != nil {
		return nil, err
	}
	for k, c := range created {
		if c.Err != nil {
			return nil, c.Err // checked above: no run here has a Check
		}
		out[keptIndex[k]] = BatchResult{WorkflowID: c.Ref.WorkflowID, InstanceID: c.Ref.InstanceID, RunID: c.Ref.RunID, UUID: c.UUID,
			GroupID: c.GroupID, StartTime: c.StartTime, Status: c.Status, Queued: c.Queued, Duplicated: c.Duplicated}
	}
	return out, nil
}

// shareTimeline gives a start the CREATED events of an earlier start of
// the batch with the same reason (a backfill's, one trigger's), which
// run.Create then encodes and sends once; timelines holds them by reason.
func shareTimeline(n *run.New, timelines map[string][]instance.TimelineEvent) {
	if len(n.Timeline) != 2 {
		return
	}
	if t, ok := timelines[n.Timeline[1].Message]; ok {
		n.Timeline = t
	} else {
		timelines[n.Timeline[1].Message] = n.Timeline
	}
}

type batchKey struct {
	id      string
	version int64
}

// batchVersions reads the versions the batch runs.
func (s *Service) batchVersions(ctx context.Context, tx pgx.Tx, starts []BatchStart) (map[batchKey]*batchVersion, error) {
	seen := map[batchKey]bool{}
	var ids []string
	var vs []int64
	var known [][]byte
	for _, st := range starts {
		k := batchKey{st.WorkflowID, st.Version}
		if !seen[k] {
			seen[k] = true
			ids, vs, known = append(ids, k.id), append(vs, k.version), append(known, s.startDefs.known(k.id))
		}
	}
	rows, err := tx.Query(ctx, batchVersionsSQL, ids, vs, known)
	if err != nil {
		return nil, fmt.Errorf("read %d workflow versions: %w", len(ids), err)
	}
	defer rows.Close()
	type read struct {
		k                batchKey
		fingerprint, raw []byte
	}
	var reads []read
	for rows.Next() {
		var r read
		if err := rows.Scan(&r.k.id, &r.k.version, &r.fingerprint, &r.raw); err != nil {
			return nil, fmt.Errorf("read %d workflow versions: %w", len(ids), err)
		}
		reads = append(reads, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %d workflow versions: %w", len(ids), err)
	}
	rows.Close()
	out := make(map[batchKey]*batchVersion, len(ids))
	for _, r := range reads {
		def, ok, err := s.startDefs.resolve(r.k.id, r.k.version, r.fingerprint, r.raw)
		if err != nil {
			return nil, err
		}
		if !ok {
			// Replaced in the cache since the statement: read it.
			if err := tx.QueryRow(ctx, `SELECT definition FROM workflow_version WHERE workflow_id = $1 AND version = $2`,
				r.k.id, r.k.version).Scan(&r.raw); err != nil {
				return nil, fmt.Errorf("read workflow %s version %d: %w", r.k.id, r.k.version, err)
			}
			if def, _, err = s.startDefs.resolve(r.k.id, r.k.version, r.fingerprint, r.raw); err != nil {
				return nil, err
			}
		}
		out[r.k] = &batchVersion{wf: def.wf}
	}
	return out, nil
}

// workflowAccess is who may act on a workflow, as lockBatch read it.
type workflowAccess struct {
	owner     string
	operators []byte
}

// lockBatch locks the batch's workflows and returns their properties and
// who may act on them; a workflow that does not exist is absent.
func lockBatch(ctx context.Context, tx pgx.Tx, starts []BatchStart) (map[string][]byte, map[string]workflowAccess, error) {
	ids := make([]string, 0, len(starts))
	for _, st := range starts {
		ids = append(ids, st.WorkflowID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	rows, err := tx.Query(ctx, batchLockSQL, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("lock %d workflows: %w", len(ids), err)
	}
	defer rows.Close()
	out := make(map[string][]byte, len(ids))
	access := make(map[string]workflowAccess, len(ids))
	for rows.Next() {
		var id string
		var props []byte
		var a workflowAccess
		if err := rows.Scan(&id, &props, &a.owner, &a.operators); err != nil {
			return nil, nil, fmt.Errorf("lock %d workflows: %w", len(ids), err)
		}
		out[id], access[id] = props, a
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("lock %d workflows: %w", len(ids), err)
	}
	return out, access, nil
}
