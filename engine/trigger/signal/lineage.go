package signal

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/maestro-aws/maestro/engine/trigger/schedule"
)

// Relation is how a signal instance and a run or step attempt are related.
type Relation string

// The relations recorded in signal_lineage.
const (
	// Produced: the step attempt announced the signal (an output signal).
	Produced Relation = "PRODUCED"
	// Started: the signal was part of the set that started the run through
	// a signal trigger.
	Started Relation = "STARTED"
	// Unblocked: the signal met one of the step attempt's dependencies.
	Unblocked Relation = "UNBLOCKED"
)

// Lineage is one relation between a signal instance and a run or a step
// attempt. Its JSON is the API's lineage entry (built here only).
type Lineage struct {
	Signal     Ref      `json:"signal"`
	Relation   Relation `json:"relation"`
	WorkflowID string   `json:"workflow_id"`
	InstanceID int64    `json:"workflow_instance_id"`
	RunID      int64    `json:"workflow_run_id"`
	// StepID and AttemptID name the step attempt (PRODUCED, UNBLOCKED).
	StepID    string `json:"step_id,omitempty"`
	AttemptID int64  `json:"step_attempt_id,omitempty"`
	// OutputIndex is the position of the output in the step's
	// signal_outputs (PRODUCED); DependencyIndex that of the dependency in
	// its signal_dependencies (UNBLOCKED).
	OutputIndex     *int `json:"output_index,omitempty"`
	DependencyIndex *int `json:"dependency_index,omitempty"`
	// TriggerUUID is the signal trigger that started the run (STARTED).
	TriggerUUID string    `json:"trigger_uuid,omitempty"`
	CreateTime  time.Time `json:"create_time"`
}

func scanLineage(r pgx.CollectableRow) (Lineage, error) {
	var (
		l       Lineage
		pos     int
		trigger *string
	)
	if err := r.Scan(&l.Signal.Seq, &l.Signal.Name, &l.Relation, &l.WorkflowID, &l.InstanceID, &l.RunID, &l.StepID,
		&l.AttemptID, &pos, &trigger, &l.CreateTime); err != nil {
		return Lineage{}, err
	}
	switch l.Relation {
	case Produced:
		l.OutputIndex = &pos
	case Unblocked:
		l.DependencyIndex = &pos
	}
	if trigger != nil {
		l.TriggerUUID = *trigger
	}
	return l, nil
}

// LineageOfSignal returns what a signal instance is related to: the step
// attempt that produced it, the runs it started, the step attempts it
// unblocked.
func (s *Store) LineageOfSignal(ctx context.Context, seq int64) ([]Lineage, error) {
	return s.lineage(ctx, sqlLineageOfSignal, fmt.Sprintf("signal instance %d", seq), seq)
}

// LineageOfRun returns the signal instances related to a run, or to one
// step of it when stepID is set: those that started it, those its step
// attempts produced and those that unblocked them.
func (s *Store) LineageOfRun(ctx context.Context, workflowID string, instanceID, runID int64, stepID string) ([]Lineage, error) {
	return s.lineage(ctx, sqlLineageOfRun, fmt.Sprintf("run %s/%d/%d", workflowID, instanceID, runID),
		workflowID, instanceID, runID, stepID)
}

func (s *Store) lineage(ctx context.Context, sql, what string, args ...any) ([]Lineage, error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read the signal lineage of %s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scanLineage)
	if err != nil {
		return nil, fmt.Errorf("read the signal lineage of %s: %w", what, err)
	}
	return out, nil
}

// Execer is what the writes need: a transaction in practice.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// StartedRun is a run a signal trigger started from a set of signals.
type StartedRun struct {
	WorkflowID  string
	InstanceID  int64
	TriggerUUID string
	Signals     []Ref
}

// RecordStarted records the STARTED lineage of runs inside tx (the
// transaction that started them).
func RecordStarted(ctx context.Context, tx Execer, runs []StartedRun) error {
	var (
		seqs     []int64
		names    []string
		wfs      []string
		iids     []int64
		triggers []string
	)
	for _, r := range runs {
		for _, s := range r.Signals {
			seqs, names, wfs = append(seqs, s.Seq), append(names, s.Name), append(wfs, r.WorkflowID)
			iids, triggers = append(iids, r.InstanceID), append(triggers, r.TriggerUUID)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, sqlInsertStarted, seqs, names, wfs, iids, triggers); err != nil {
		return fmt.Errorf("record the signal lineage of %d runs: %w", len(runs), err)
	}
	return nil
}

// Output is one output signal of a step attempt, as OutputsSQL reads it.
type Output struct {
	Name       string         `json:"name"`
	InstanceID string         `json:"instance_id"`
	Params     map[string]any `json:"params"`
	Payload    map[string]any `json:"payload"`
	// The producing attempt and the output's position in signal_outputs.
	WorkflowID string `json:"workflow_id"`
	InstanceNo int64  `json:"workflow_instance_id"`
	RunID      int64  `json:"workflow_run_id"`
	StepID     string `json:"step_id"`
	AttemptID  int64  `json:"step_attempt_id"`
	Position   int    `json:"position"`
}

// OutputInstanceID is the instance id (and request id) of a step
// attempt's output signal at position i: one per attempt and output, so
// that a write repeated after a lost acknowledgement, or a step whose
// terminal write is retried, announces it once, while every attempt (a
// retry, a restarted run) announces its own.
func OutputInstanceID(workflowID string, instanceID, runID int64, stepID string, attemptID int64, i int) string {
	return schedule.NameUUID(strings.Join([]string{"signal_output", workflowID, strconv.FormatInt(instanceID, 10),
		strconv.FormatInt(runID, 10), stepID, strconv.FormatInt(attemptID, 10), strconv.Itoa(i)}, "\x00")).String()
}

// OutputsSQLAt is OutputsSQL with the outputs in parameter $n.
func OutputsSQLAt(n int) string {
	return strings.ReplaceAll(OutputsSQL, "$N", "$"+strconv.Itoa(n))
}

// ClaimPending claims up to limit signals stored without having been
// matched (signal_pending) that are at least minAge old, deleting their
// rows inside tx, and returns their seqs. Rows another transaction holds
// are skipped, and so are the signals of runs of a paused backfill that
// propagates downstream (held until it is resumed).
func ClaimPending(ctx context.Context, tx Querier, limit int, minAge time.Duration) ([]int64, error) {
	rows, err := tx.Query(ctx, sqlClaimPending, limit, minAge)
	if err != nil {
		return nil, fmt.Errorf("claim pending signals: %w", err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("claim pending signals: %w", err)
	}
	return seqs, nil
}

// CountPending returns how many stored signals wait to be matched.
func CountPending(ctx context.Context, q Querier) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, sqlCountPending).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending signals: %w", err)
	}
	return n, nil
}

// DeferTriggers records signals whose matching against signal triggers
// waits while triggers are paused (signal_trigger_deferred, migration
// 00170); a signal already deferred is left as it is.
func DeferTriggers(ctx context.Context, tx Execer, seqs []int64) error {
	if _, err := tx.Exec(ctx, sqlDeferTriggers, seqs); err != nil {
		return fmt.Errorf("defer %d signals while triggers are paused: %w", len(seqs), err)
	}
	return nil
}

// ClaimDeferred claims up to limit signals deferred while triggers were
// paused, oldest first, deleting their rows inside tx, and returns their
// seqs. Rows another transaction holds are skipped.
func ClaimDeferred(ctx context.Context, tx Querier, limit int) ([]int64, error) {
	rows, err := tx.Query(ctx, sqlClaimDeferred, limit)
	if err != nil {
		return nil, fmt.Errorf("claim deferred signals: %w", err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("claim deferred signals: %w", err)
	}
	return seqs, nil
}

// Producer is the run whose step produced a signal instance (an output
// signal).
type Producer struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
}

// Producers returns the producing run of each of seqs that a step
// produced; signals announced otherwise are absent.
func Producers(ctx context.Context, q Querier, seqs []int64) (map[int64]Producer, error) {
	out := map[int64]Producer{}
	if len(seqs) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, sqlProducers, seqs)
	if err != nil {
		return nil, fmt.Errorf("read the producers of %d signals: %w", len(seqs), err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var p Producer
		if err := rows.Scan(&seq, &p.WorkflowID, &p.InstanceID, &p.RunID); err != nil {
			return nil, fmt.Errorf("read the producers of %d signals: %w", len(seqs), err)
		}
		out[seq] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the producers of %d signals: %w", len(seqs), err)
	}
	return out, nil
}
