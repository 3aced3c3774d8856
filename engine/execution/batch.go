package execution

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/pgparam"
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
// workflows and allocates an instance id for every start
// (run.QueueLockAllocate), and the lookup of stored runs with the starts'
// request ids (run.FindStarted, only when a start has one), the three
// sent together in one round trip (a pipeline: each runs once the one
// before it has finished, so the lookup still runs with the locks held,
// in a snapshot of its own); then the give-back of the ids no start took
// (run.GiveBack, only when a start turned out a duplicate, was refused or
// named a version that does not exist), and run.Create's INSERT. While
// PostgreSQL reads, locks and looks up, this process decides what needs no
// lock: each start's inputs (param modes, initiator), from the definition
// cached for its workflow, settled against the versions read.
// What only the lock can decide (a stored run with the request id,
// committed by a transaction that held the lock before this one; the
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
	// What the statements need: the versions, an id per start of each
	// workflow, the request ids (maps sized for a batch of many
	// workflows: one grown from empty costs as much again).
	vk := newVersionKeys(s.startDefs, len(starts))
	counts := make(map[string]int64, len(starts))
	var lookIDs, lookRIDs []string
	for i, st := range starts {
		out[i].WorkflowID = st.WorkflowID
		vk.add(batchKey{st.WorkflowID, st.Version})
		counts[st.WorkflowID]++
		if st.RequestID != "" {
			lookIDs, lookRIDs = append(lookIDs, st.WorkflowID), append(lookRIDs, st.RequestID)
		}
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
	b := &pgx.Batch{}
	b.Queue(batchVersionsSQL, vk.ids, vk.versions, vk.known)
	run.QueueLockAllocate(b, ids, ns)
	run.QueueFindStarted(b, lookIDs, lookRIDs)
	// The batch's messages encoded into one buffer of their size, each
	// statement's parameters likewise (pgparam).
	size := 0
	for _, q := range b.QueuedQueries {
		size += 64 + pgparam.Estimate(q.Arguments)
		pgparam.Sized[[]string](q.Arguments)
	}
	pgparam.Reserve(tx.Conn().PgConn(), size)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	// While PostgreSQL reads the versions, locks and looks up: each
	// start's inputs, from the definition cached for its workflow, checked
	// against the versions read once they come (batchInputs.settle).
	in := newBatchInputs(s, starts)
	for i, st := range starts {
		if wf := vk.cached[batchKey{st.WorkflowID, st.Version}]; wf != nil {
			if err := in.decide(i, wf); err != nil {
				return nil, err
			}
		}
	}
	reads, err := readVersions(br, len(vk.ids))
	if err != nil {
		return nil, err
	}
	versions, missed, err := s.resolveVersions(reads)
	if err != nil {
		return nil, err
	}
	if len(missed) == 0 {
		if err := in.settle(versions, out); err != nil {
			return nil, err
		}
	}
	locks, err := run.ReadLockAllocate(br, len(ids))
	if err != nil {
		return nil, err
	}
	stored, err := run.ReadFindStarted(br, lookIDs)
	if err != nil {
		return nil, err
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("lock %d workflows and look up their starts: %w", len(ids), err)
	}
	if len(missed) > 0 {
		if err := s.rereadVersions(ctx, tx, missed, versions); err != nil {
			return nil, err
		}
		if err := in.settle(versions, out); err != nil {
			return nil, err
		}
	}
	runs, checkErr := in.runs, in.checkErr
	// Under the lock: the authorizations.
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
	}
	// In order, as Start would: a stored run's duplicate, an earlier
	// start's duplicate, refused inputs, or a run with the next id.
	next := make(map[string]int64, len(locks))
	props := make(map[string][]byte, len(locks))
	for id, l := range locks {
		props[id], next[id] = l.Props, l.Last-counts[id]+1
	}
	earlier := make(map[run.StartKey]int, len(lookIDs))
	dupOf := map[int]int{}
	kept := runs[:0]                         // in place: a run is kept from its own start or one before it
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

// batchInputs are the inputs of a batch's starts (param modes,
// initiator, timeout, CREATED events): what a start needs no lock for,
// decided from a version's definition (decide) before that version is
// known to be the one to run, and settled once the versions are read.
type batchInputs struct {
	s        *Service
	starts   []BatchStart
	runs     []run.New
	checkErr []error
	// from is the definition start i's inputs were decided from.
	from      []*workflow.Workflow
	timelines map[string][]instance.TimelineEvent
}

func newBatchInputs(s *Service, starts []BatchStart) *batchInputs {
	return &batchInputs{s: s, starts: starts, runs: make([]run.New, len(starts)), checkErr: make([]error, len(starts)),
		from: make([]*workflow.Workflow, len(starts)), timelines: map[string][]instance.TimelineEvent{}}
}

// decide decides start i's inputs from wf into runs[i]; a refusal goes to
// checkErr[i] (it stands unless a stored run has the start's request id).
// It touches no connection.
func (b *batchInputs) decide(i int, wf *workflow.Workflow) error {
	st := b.starts[i]
	n := &b.runs[i]
	*n = run.New{Ref: run.Ref{WorkflowID: st.WorkflowID}, Version: st.Version, RequestID: st.RequestID,
		Workflow: wf, GroupCount: b.s.groupCount}
	b.from[i], b.checkErr[i] = wf, nil
	if err := startInputs(n, st.RunParams, st.Initiator); err != nil {
		if !errors.Is(err, ErrInvalid) {
			return err
		}
		b.checkErr[i] = err
		return nil
	}
	shareTimeline(n, b.timelines)
	return nil
}

// settle makes each start's inputs those of the version read: a start
// decided from another definition (none cached, or the cache's not the
// version's) is decided again; a start whose version was not read is
// ErrNotFound in out.
func (b *batchInputs) settle(versions map[batchKey]*batchVersion, out []BatchResult) error {
	for i, st := range b.starts {
		v, ok := versions[batchKey{st.WorkflowID, st.Version}]
		if !ok {
			out[i].Err = fmt.Errorf("workflow %s version %d: %w", st.WorkflowID, st.Version, ErrNotFound)
			continue
		}
		if b.from[i] != v.wf {
			if err := b.decide(i, v.wf); err != nil {
				return err
			}
		}
	}
	return nil
}

// versionKeys are the distinct versions a batch runs, with the
// fingerprints of the definitions cached (batchVersionsSQL's $1..$3) and
// those definitions (cached: the one to run unless the versions' read
// says otherwise).
type versionKeys struct {
	defs     *startDefinitions
	seen     map[batchKey]bool
	ids      []string
	versions []int64
	known    [][]byte
	cached   map[batchKey]*workflow.Workflow
}

func newVersionKeys(defs *startDefinitions, n int) *versionKeys {
	return &versionKeys{defs: defs, seen: make(map[batchKey]bool, n),
		ids: make([]string, 0, n), versions: make([]int64, 0, n), known: make([][]byte, 0, n),
		cached: make(map[batchKey]*workflow.Workflow, n)}
}

func (v *versionKeys) add(k batchKey) {
	if !v.seen[k] {
		v.seen[k] = true
		var known []byte
		if e := v.defs.cached(k.id); e != nil {
			known, v.cached[k] = e.fingerprint, e.wf
		}
		v.ids, v.versions, v.known = append(v.ids, k.id), append(v.versions, k.version), append(v.known, known)
	}
}

// versionRead is a row of batchVersionsSQL: a definition only when the
// cached one is not the version's.
type versionRead struct {
	k                batchKey
	fingerprint, raw []byte
}

// readVersions reads batchVersionsSQL's answer, the first of br's.
func readVersions(br pgx.BatchResults, n int) ([]versionRead, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("read %d workflow versions: %w", n, err)
	}
	defer rows.Close()
	var reads []versionRead
	for rows.Next() {
		var r versionRead
		if err := rows.Scan(&r.k.id, &r.k.version, &r.fingerprint, &r.raw); err != nil {
			return nil, fmt.Errorf("read %d workflow versions: %w", n, err)
		}
		reads = append(reads, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %d workflow versions: %w", n, err)
	}
	return reads, nil
}

// resolveVersions decodes the versions read (or takes them from the
// cache); missed are those whose cached definition was replaced since the
// statement, to be read again (rereadVersions).
func (s *Service) resolveVersions(reads []versionRead) (map[batchKey]*batchVersion, []versionRead, error) {
	out := make(map[batchKey]*batchVersion, len(reads))
	var missed []versionRead
	for _, r := range reads {
		def, ok, err := s.startDefs.resolve(r.k.id, r.k.version, r.fingerprint, r.raw)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			missed = append(missed, r)
			continue
		}
		out[r.k] = &batchVersion{wf: def.wf}
	}
	return out, missed, nil
}

// rereadVersions reads the definitions of the versions missed and adds
// them to versions.
func (s *Service) rereadVersions(ctx context.Context, tx pgx.Tx, missed []versionRead, versions map[batchKey]*batchVersion) error {
	for _, r := range missed {
		if err := tx.QueryRow(ctx, `SELECT definition FROM workflow_version WHERE workflow_id = $1 AND version = $2`,
			r.k.id, r.k.version).Scan(&r.raw); err != nil {
			return fmt.Errorf("read workflow %s version %d: %w", r.k.id, r.k.version, err)
		}
		def, _, err := s.startDefs.resolve(r.k.id, r.k.version, r.fingerprint, r.raw)
		if err != nil {
			return err
		}
		versions[r.k] = &batchVersion{wf: def.wf}
	}
	return nil
}
