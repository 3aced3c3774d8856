package signalbroker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/incremental"
	"github.com/maestro-aws/maestro/engine/ops"
	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/engine/trigger"
	"github.com/maestro-aws/maestro/engine/trigger/schedule"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// Incremental triggers (docs/incremental.md): a set matched by a trigger
// with "incremental": true is one table change. It is recorded against
// the (workflow, table) watermark, and when no run of the table is in
// flight a run starts for the range since the watermark, in the
// transaction that matched the signal. A change that arrives while a run
// is in flight waits; the sweep (ProcessIncremental) starts one run for
// all of them once that run has ended.

// ManifestWriter writes the JSON manifest of the files a range added when
// they are more than incremental.MaxAddedFiles, and returns its s3:// URI.
// key is unique per run (workflow, table and the run's seq).
type ManifestWriter func(ctx context.Context, key string, r tablechange.Range, files []tablechange.DataFile) (string, error)

// SetTableReader makes the runs of incremental triggers get the files
// their range added (the added_* params): reader lists them, manifests
// writes the manifest of a range that added more than
// incremental.MaxAddedFiles (without it such a range does not start; the
// sweep tries again). Call it before the broker is used; nil reader: no
// added_* params.
func (b *Broker) SetTableReader(reader tablechange.Reader, manifests ManifestWriter) {
	b.reader, b.manifests = reader, manifests
}

// incrementalSet is one table change an incremental trigger matched.
type incrementalSet struct {
	set  int
	name string
	seq  int64
	ch   tablechange.Change
}

// startIncremental records the changes of the incremental sets and starts
// the runs of the ranges that are due, inside tx (which holds the
// workflows' locks). It fills the sets' trigger records.
func (b *Broker) startIncremental(ctx context.Context, tx pgx.Tx, sets []completeSet, idx []int,
	evals []evaluation, versions map[string]int64) (map[int]*setOutcome, []execution.BatchResult, error) {
	outcomes := make(map[int]*setOutcome, len(idx))
	records := func(i int) *setOutcome {
		if outcomes[i] == nil {
			outcomes[i] = &setOutcome{}
		}
		return outcomes[i]
	}
	type group struct {
		wf, uuid string
		changes  []incremental.Received
		sets     []incrementalSet
	}
	var groups []*group
	byKey := map[[2]string]*group{}
	for _, i := range idx {
		s := sets[i]
		r := records(i)
		if !evals[i].run {
			r.Error = evals[i].err.Error()
			b.log.Info("incremental trigger matched but recorded no change", "workflow_id", s.workflowID,
				"trigger_uuid", s.trig.uuid, "reason", r.Error)
			continue
		}
		name := s.trig.names[0]
		m := s.members[name]
		ch, err := tablechange.ChangeFromSignalParams(m.params)
		if err != nil {
			r.Error = "not a table change: " + err.Error()
			b.log.Warn("incremental trigger refused a signal that is not a table change", "workflow_id", s.workflowID,
				"trigger_uuid", s.trig.uuid, "signal", name, "signal_id", m.seq, "reason", err.Error())
			continue
		}
		k := [2]string{s.workflowID, s.trig.uuid}
		g := byKey[k]
		if g == nil {
			g = &group{wf: s.workflowID, uuid: s.trig.uuid}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.changes = append(g.changes, incremental.Received{Change: ch, SignalSeq: m.seq})
		g.sets = append(g.sets, incrementalSet{set: i, name: name, seq: m.seq, ch: ch})
	}
	var keys []incremental.Key
	for _, g := range groups {
		ks, err := incremental.Record(ctx, tx, g.wf, g.uuid, g.changes)
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, ks...)
	}
	plans, err := incremental.Plan(ctx, tx, sortKeys(keys), false)
	if err != nil {
		return nil, nil, err
	}
	started, results, err := b.startPlans(ctx, tx, plans, versions)
	if err != nil {
		return nil, nil, err
	}
	// Each set records the run its table's range started, if any.
	runOf := map[incremental.Key]int64{}
	for k, r := range started {
		runOf[k] = r
	}
	for _, g := range groups {
		for _, s := range g.sets {
			r := records(s.set)
			if id, ok := runOf[incremental.Key{WorkflowID: g.wf, Table: s.ch.Table.String()}]; ok {
				r.InstanceID = id
				r.started = true
				delete(runOf, incremental.Key{WorkflowID: g.wf, Table: s.ch.Table.String()})
			} else {
				r.Error = fmt.Sprintf("table change %s@%d recorded: a run of the table is in flight, or it is covered",
					s.ch.Table, s.ch.SnapshotID)
			}
		}
	}
	return outcomes, results, nil
}

// setOutcome is what became of one incremental set: the run it started,
// or why none.
type setOutcome struct {
	InstanceID int64
	started    bool
	Error      string
}

// startPlans starts one run per planned range, inside tx, and marks each
// in flight. A range whose workflow has no active version, or whose added
// files cannot be read, is left due for the sweep. It returns the run of
// each range started.
func (b *Broker) startPlans(ctx context.Context, tx pgx.Tx, plans []incremental.Planned,
	versions map[string]int64) (map[incremental.Key]int64, []execution.BatchResult, error) {
	if len(plans) == 0 {
		return nil, nil, nil
	}
	var seqs []int64
	for _, p := range plans {
		if p.ToSignalSeq > 0 {
			seqs = append(seqs, p.ToSignalSeq)
		}
	}
	sigs, err := signal.BySeq(ctx, tx, seqs)
	if err != nil {
		return nil, nil, err
	}
	var (
		starts []execution.BatchStart
		planOf []incremental.Planned
		refs   [][]signal.Ref
	)
	for _, p := range plans {
		version, ok := versions[p.WorkflowID]
		if !ok {
			b.log.Warn("incremental range not started: the workflow has no active version", "workflow_id", p.WorkflowID,
				"table", p.Table)
			continue
		}
		var added *incremental.Added
		if b.reader != nil {
			if added, err = b.readAdded(ctx, p); err != nil {
				b.log.Warn("incremental range not started: reading what it added failed; the sweep tries again",
					"workflow_id", p.WorkflowID, "table", p.Table, "from_snapshot_id", p.FromSnapshotID,
					"to_snapshot_id", p.ToSnapshotID, "error", err.Error())
				continue
			}
		}
		initiator := map[string]any{"type": "SIGNAL", "trigger_uuid": p.TriggerUUID, "depth": 0,
			"incremental": incremental.Initiator(p)}
		var ref []signal.Ref
		if s := sigs[p.ToSignalSeq]; s != nil {
			initiator["signal_id_map"] = map[string]int64{s.Name: s.Seq}
			ref = []signal.Ref{{Name: s.Name, Seq: s.Seq}}
		}
		starts = append(starts, execution.BatchStart{WorkflowID: p.WorkflowID, Version: version,
			RequestID: RangeRequestID(p), Initiator: initiator, RunParams: incremental.RunParams(p, added)})
		planOf = append(planOf, p)
		refs = append(refs, ref)
	}
	if len(starts) == 0 {
		return nil, nil, nil
	}
	results, err := b.runs.StartBatchTx(ctx, tx, starts)
	if err != nil {
		return nil, nil, err
	}
	out := map[incremental.Key]int64{}
	var lineage []signal.StartedRun
	for k, res := range results {
		p := planOf[k]
		if res.Err != nil {
			// Refused (the workflow's params forbid the range params):
			// the range stays due and is tried again by the sweep.
			b.log.Warn("incremental range start refused", "workflow_id", p.WorkflowID, "table", p.Table,
				"error", res.Err.Error())
			continue
		}
		if err := incremental.Started(ctx, tx, p, res.InstanceID, ""); err != nil {
			return nil, nil, err
		}
		out[p.Key] = res.InstanceID
		if len(refs[k]) > 0 && !res.Duplicated {
			lineage = append(lineage, signal.StartedRun{WorkflowID: p.WorkflowID, InstanceID: res.InstanceID,
				TriggerUUID: p.TriggerUUID, Signals: refs[k]})
		}
	}
	if err := signal.RecordStarted(ctx, tx, lineage); err != nil {
		return nil, nil, err
	}
	return out, results, nil
}

// RangeRequestID is the request id of the run that covers p: one per
// (workflow, table, seq), so a start repeated after a failure is a
// duplicate, not a second run.
func RangeRequestID(p incremental.Planned) string {
	return schedule.NameUUID(fmt.Sprintf(`{"workflow_id":%q,"incremental_table":%q,"seq":%d}`,
		p.WorkflowID, p.Table, p.Seq)).String()
}

// readAdded lists the files p's range added, with a manifest when they are
// more than the added_files param holds.
func (b *Broker) readAdded(ctx context.Context, p incremental.Planned) (*incremental.Added, error) {
	ctx, cancel := context.WithTimeout(ctx, readerTimeout)
	defer cancel()
	r := p.Range()
	ch, err := b.reader.Changes(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("read the changes of %s in (%d, %d]: %w", p.Table, p.FromSnapshotID, p.ToSnapshotID, err)
	}
	added := &incremental.Added{Files: ch.AddedFiles}
	if len(ch.AddedFiles) > incremental.MaxAddedFiles {
		if b.manifests == nil {
			return nil, fmt.Errorf("%d files added and no manifest writer configured", len(ch.AddedFiles))
		}
		key := fmt.Sprintf("%s/%s/%d", p.WorkflowID, p.Table, p.Seq)
		if added.Manifest, err = b.manifests(ctx, key, r, ch.AddedFiles); err != nil {
			return nil, fmt.Errorf("write the manifest of %d files: %w", len(ch.AddedFiles), err)
		}
	}
	return added, nil
}

// ProcessIncremental ends the ranges of runs that ended without the
// engine (stopped before they started), then starts the runs of up to
// limit watermarks that wait for one (changes received while a run was
// in flight), each in its own transaction with the workflow locked. It
// returns how many runs it started and how many due watermarks it saw.
func (b *Broker) ProcessIncremental(ctx context.Context, limit int) (started, seen int, err error) {
	orphans, err := incremental.Orphans(ctx, b.db, limit)
	if err != nil {
		return 0, 0, err
	}
	for _, o := range orphans {
		if err := retry(ctx, func() error {
			return pgx.BeginFunc(ctx, b.db, func(tx pgx.Tx) error {
				if _, err := trigger.LockWorkflows(ctx, tx, []string{o.WorkflowID}); err != nil {
					return err
				}
				_, err := incremental.Ended(ctx, tx, o.WorkflowID, o.InstanceID, o.Status)
				return err
			})
		}); err != nil {
			return 0, 0, err
		}
	}
	due, err := incremental.Due(ctx, b.db, limit)
	if err != nil {
		return 0, 0, err
	}
	for _, k := range due {
		var results []execution.BatchResult
		n := 0
		err := retry(ctx, func() error {
			return pgx.BeginFunc(ctx, b.db, func(tx pgx.Tx) error {
				// A maintenance pause of every trigger holds these runs too.
				if paused, err := ops.TriggersPausedLocked(ctx, tx); err != nil || paused {
					return err
				}
				versions, err := trigger.LockWorkflows(ctx, tx, []string{k.WorkflowID})
				if err != nil {
					return err
				}
				plans, err := incremental.Plan(ctx, tx, []incremental.Key{k}, true)
				if err != nil {
					return err
				}
				if len(plans) > 0 && b.testPause != nil {
					b.testPause()
				}
				runs, res, err := b.startPlans(ctx, tx, plans, versions)
				if err != nil {
					return err
				}
				n, results = len(runs), res
				if len(plans) > 0 && n == 0 {
					// Not started (no active version, a reader error, a
					// refused start): to the back of the list.
					return incremental.Touch(ctx, tx, k)
				}
				return nil
			})
		})
		if err != nil {
			return started, len(due), err
		}
		b.runs.AfterBatch(ctx, results)
		started += n
	}
	return started, len(due), nil
}

func sortKeys(keys []incremental.Key) []incremental.Key {
	slices.SortFunc(keys, func(a, b incremental.Key) int {
		if a.WorkflowID != b.WorkflowID {
			if a.WorkflowID < b.WorkflowID {
				return -1
			}
			return 1
		}
		if a.Table < b.Table {
			return -1
		}
		if a.Table > b.Table {
			return 1
		}
		return 0
	})
	return slices.Compact(keys)
}

// readerTimeout bounds the reading of one range's added files.
const readerTimeout = 30 * time.Second
