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

// StartBatchTx applies starts in order inside tx, as if each were a Start,
// and returns one result per start. The caller commits tx and then calls
// AfterBatch. It takes the lock of every workflow of the batch (in id
// order), so the caller may hold some of them already.
//
// Its statements: the versions' read, one statement that locks the
// workflows and allocates instance ids for every start that may be
// created (run.LockAllocate), the lookup of stored runs with the starts'
// request ids (run.FindStarted, only when a start has one), the give-back
// of the ids no start took (run.GiveBack, only when a start turned out a
// duplicate of a stored run or was refused under the lock), and
// run.Create's INSERT. What can be decided before the lock is: a start's
// inputs (param modes, initiator) and its repeating an earlier start of
// the batch. What only the lock can decide (a stored run with the request
// id, committed by a transaction that held the lock before this one; the
// caller's authorization against the owner and operators as locked) is
// decided after it, and the ids allocated for the starts it leaves out
// are given back, the highest first, before any other transaction can
// allocate (the locks are held): the created runs take the lowest ids in
// order, so a workflow's ids stay dense.
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
	// Before the lock: each start's inputs; the ids to allocate, one per
	// start that may be created.
	runs := make([]run.New, len(starts))
	checkErr := make([]error, len(starts))
	counts := map[string]int64{}
	timelines := map[string][]instance.TimelineEvent{}
	keyed := false
	for i, st := range starts {
		v, ok := versions[batchKey{st.WorkflowID, st.Version}]
		if !ok {
			out[i].Err = fmt.Errorf("workflow %s version %d: %w", st.WorkflowID, st.Version, ErrNotFound)
			continue
		}
		n := &runs[i]
		*n = run.New{Ref: run.Ref{WorkflowID: st.WorkflowID}, Version: st.Version, RequestID: st.RequestID,
			Workflow: v.wf, GroupCount: s.groupCount}
		if _, ok := counts[st.WorkflowID]; !ok {
			counts[st.WorkflowID] = 0 // locked even when no start of it may be created
		}
		keyed = keyed || st.RequestID != ""
		if err := startInputs(n, st.RunParams, st.Initiator); err != nil {
			if !errors.Is(err, ErrInvalid) {
				return nil, err
			}
			checkErr[i] = err // unless a stored run has its request id
			continue
		}
		shareTimeline(n, timelines)
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
	// Under the lock: the authorizations, the stored runs with the
	// request ids.
	var lookIDs, lookRIDs []string
	for i, st := range starts {
		if out[i].Err != nil {
			continue
		}
		l, ok := locks[st.WorkflowID]
		if !ok { // deleted since its version was read
			out[i].Err = fmt.Errorf("workflow %s version %d: %w", st.WorkflowID, st.Version, ErrNotFound)
			continue
		}
		if st.Authorize != nil {
			if err := st.Authorize(l.Owner, workflow.Operators(l.Operators)); err != nil {
				out[i].Err = &DeniedError{Err: err}
				continue
			}
		}
		if st.RequestID != "" {
			lookIDs, lookRIDs = append(lookIDs, st.WorkflowID), append(lookRIDs, st.RequestID)
		}
	}
	var stored map[run.StartKey]run.Created
	if keyed {
		if stored, err = run.FindStarted(ctx, tx, lookIDs, lookRIDs); err != nil {
			return nil, err
		}
	}
	// In order, as Start would: a stored run's duplicate, an earlier
	// start's duplicate, refused inputs, or a run with the next id.
	next := make(map[string]int64, len(locks))
	props := make(map[string][]byte, len(locks))
	for id, l := range locks {
		props[id], next[id] = l.Props, l.Last-counts[id]+1
	}
	earlier := map[run.StartKey]int{}
	dupOf := map[int]int{}
	kept := make([]run.New, 0, len(starts))
	keptIndex := make([]int, 0, len(starts)) // start of each run
	for i, st := range starts {
		if out[i].Err != nil {
			continue
		}
		k := run.StartKey{WorkflowID: st.WorkflowID, RequestID: st.RequestID}
		if st.RequestID != "" {
			if c, ok := stored[k]; ok {
				out[i] = BatchResult{WorkflowID: c.Ref.WorkflowID, InstanceID: c.Ref.InstanceID, RunID: c.Ref.RunID, UUID: c.UUID,
					GroupID: c.GroupID, Status: c.Status, Queued: c.Queued, Duplicated: true}
				continue
			}
			if j, ok := earlier[k]; ok {
				dupOf[i] = j
				continue
			}
		}
		if checkErr[i] != nil {
			out[i].Err = checkErr[i]
			continue
		}
		if st.RequestID != "" {
			earlier[k] = i
		}
		n := runs[i]
		n.Ref.InstanceID = next[st.WorkflowID]
		next[st.WorkflowID]++
		kept, keptIndex = append(kept, n), append(keptIndex, i)
	}
	// The ids allocated for starts that were not created go back.
	var backIDs []string
	var backNs []int64
	for _, id := range ids {
		l, ok := locks[id]
		if !ok {
			continue
		}
		if unused := l.Last + 1 - next[id]; unused > 0 {
			backIDs, backNs = append(backIDs, id), append(backNs, unused)
		}
	}
	if err := run.GiveBack(ctx, tx, backIDs, backNs); err != nil {
		return nil, err
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
	for i, j := range dupOf {
		f := out[j]
		out[i] = BatchResult{WorkflowID: f.WorkflowID, InstanceID: f.InstanceID, RunID: f.RunID, UUID: f.UUID,
			GroupID: f.GroupID, Status: f.Status, Queued: f.Queued, Duplicated: true}
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
