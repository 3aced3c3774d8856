// Package backfill stores managed backfills (docs/backfill.md): one
// workflow version run over a list of partition values, a run per value,
// at most Concurrency in flight. It owns the backfill and
// backfill_partition tables: creating a backfill, reading it with its
// partitions and downstream runs, its actions (pause, resume, cancel,
// retry), and Drive, one pass of the driver that starts partitions' runs
// through execution's batch path (run.Create) and links each to its
// partition in the same transaction.
package backfill

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Status is a backfill's status.
type Status string

// A backfill's statuses. RUNNING and PAUSED are live; the others are
// terminal but FAILED, which the retry action makes RUNNING again.
const (
	Running   Status = "RUNNING"
	Paused    Status = "PAUSED"
	Succeeded Status = "SUCCEEDED"
	Failed    Status = "FAILED"
	Cancelled Status = "CANCELLED"
)

// A partition's states as stored. GET shows a linked partition's run
// status instead (Partition.Status).
const (
	StatePending   = "PENDING"
	StateRunning   = "RUNNING"
	StateSucceeded = "SUCCEEDED"
	StateFailed    = "FAILED"
	StateStopped   = "STOPPED"
	StateSkipped   = "SKIPPED"
	StateCancelled = "CANCELLED"
)

// Action is what may be done to a backfill.
type Action string

// The actions.
const (
	ActionPause  Action = "pause"
	ActionResume Action = "resume"
	ActionCancel Action = "cancel"
	// ActionRetry starts the FAILED and STOPPED partitions again.
	ActionRetry Action = "retry"
)

// transitions is the backfill state machine's action table: the status an
// action moves each status to. A pair missing is ErrInvalidTransition. The
// driver's own moves (RUNNING to SUCCEEDED or FAILED) are not actions.
var transitions = map[Action]map[Status]Status{
	ActionPause:  {Running: Paused},
	ActionResume: {Paused: Running},
	ActionCancel: {Running: Cancelled, Paused: Cancelled, Failed: Cancelled},
	ActionRetry:  {Running: Running, Paused: Paused, Failed: Running},
}

// ParseAction reads an action's name.
func ParseAction(s string) (Action, bool) {
	a := Action(s)
	_, ok := transitions[a]
	return a, ok
}

// Next is the status action moves from; ErrInvalidTransition when it may
// not.
func Next(from Status, a Action) (Status, error) {
	to, ok := transitions[a][from]
	if !ok {
		return "", fmt.Errorf("%w: cannot %s a %s backfill", ErrInvalidTransition, a, from)
	}
	return to, nil
}

// Errors of the store.
var (
	ErrNotFound          = errors.New("backfill not found")
	ErrInvalidTransition = errors.New("invalid backfill transition")
)

// Initiator is the initiator type of the runs a backfill causes.
const Initiator = "BACKFILL"

// Backfill is a stored backfill.
type Backfill struct {
	ID          string
	WorkflowID  string
	Version     int64
	Param       string
	ParamType   workflow.ParamType
	Format      string
	Spec        Spec
	Concurrency int
	Downstream  bool
	Rerun       bool
	Status      Status
	RequestID   string
	CreatedBy   string
	Partitions  int
	CreateTime  time.Time
	ModifyTime  time.Time
	EndTime     *time.Time
}

// Partition is one value of a backfill with its run.
type Partition struct {
	Seq   int
	Value string
	// InstanceID is the value's run: the backfill's, or the SUCCEEDED run
	// it was skipped for; nil before it starts.
	InstanceID *int64
	RunID      *int64
	// Status is the run's status when the partition has a run of the
	// backfill, else the partition's state (PENDING, SKIPPED, CANCELLED,
	// or FAILED when its run could not be created).
	Status  string
	Attempt int
}

// Run is a run a backfill caused downstream.
type Run struct {
	InstanceID int64
	RunID      int64
	Status     string
}

// Downstream is what a backfill caused in one downstream workflow.
type Downstream struct {
	Runs   []Run
	Counts map[string]int
}

// Detail is a backfill as GET shows it.
type Detail struct {
	Backfill
	// Counts are the partitions by Partition.Status.
	Counts     map[string]int
	Partitions []Partition
	// Downstream is keyed by workflow id.
	Downstream map[string]*Downstream
}

// Store reads and writes backfills.
type Store struct {
	db   *pgxpool.Pool
	defs *definition.Store
	runs *execution.Service
	// testPause, tests only, runs inside a driver pass's transaction once
	// it has started runs, before the commit.
	testPause func()
}

// SetTestPause, tests only, makes every driver pass that starts runs call
// f before it commits (the kill -9 tests land a kill there).
func (s *Store) SetTestPause(f func()) { s.testPause = f }

// NewStore returns a store over db; defs names the versions backfills
// run, runs starts their runs.
func NewStore(db *pgxpool.Pool, defs *definition.Store, runs *execution.Service) *Store {
	return &Store{db: db, defs: defs, runs: runs}
}

// IsLive reports whether a backfill may still start runs.
func (s Status) IsLive() bool { return s == Running || s == Paused }
