package trigger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/trigger/schedule"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Signal triggers: one signal_trigger row per signal trigger of a
// workflow's active version, and one signal_subscription row per signal
// name of each ACTIVE one, kept in step with the definition store like the
// time triggers (SyncSignals). The signal broker (engine/trigger/signalbroker)
// reads the subscriptions of the names it announces, and keeps what a
// multi-signal trigger waits for in signal_trigger_pending.

// signalTransitions lists the states a signal trigger may take; "" is no
// row (the active version does not have it).
var signalTransitions = map[State][]State{
	"":            {StateActive, StateDisabled},
	StateActive:   {StateActive, StateDisabled, ""},
	StateDisabled: {StateDisabled, StateActive, ""},
}

// SignalTransition checks that a signal trigger in from may become to.
func SignalTransition(from, to State) error {
	if !slices.Contains(signalTransitions[from], to) {
		return fmt.Errorf("%w: signal trigger %q to %q", ErrInvalidTransition, from, to)
	}
	return nil
}

// SignalTrigger is one stored signal trigger.
type SignalTrigger struct {
	WorkflowID string `json:"workflow_id"`
	// UUID is the trigger's uuid: a name-based uuid of its definition, so
	// a version that keeps the trigger unchanged keeps its row, and what
	// it waits for. SIGNAL initiators carry it as trigger_uuid.
	UUID       string          `json:"trigger_uuid"`
	Index      int             `json:"trigger_index"`
	Version    int64           `json:"workflow_version_id"`
	Definition json.RawMessage `json:"signal_trigger"`
	// Names are the signal names of its definitions, sorted.
	Names []string `json:"signal_names"`
	// State is ACTIVE, or DISABLED by properties.signal_trigger_disabled.
	State State `json:"state"`
	// MatchCount counts the satisfying sets of signal instances found,
	// StartCount the runs they started.
	MatchCount int64 `json:"match_count"`
	StartCount int64 `json:"start_count"`
	// LastMatchedAt, LastSignalIDs (signal name to seq id) and
	// LastInstanceID describe the last satisfying set and the run it
	// started.
	LastMatchedAt  *time.Time       `json:"last_matched_at,omitempty"`
	LastSignalIDs  map[string]int64 `json:"last_signal_id_map,omitempty"`
	LastInstanceID *int64           `json:"last_workflow_instance_id,omitempty"`
	// Error says why the last satisfying set started no run.
	Error string `json:"error,omitempty"`
	// Pending counts the signal instances waiting for their partners.
	Pending int64 `json:"pending_signals"`
}

// SignalTriggerUUID is the uuid of a signal trigger given its definition's
// JSON: a name-based uuid of the definition in canonical form (object keys
// sorted, numbers as written), so that only a change of the trigger
// changes it.
func SignalTriggerUUID(def json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(def))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("decode signal trigger: %w", err)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode signal trigger: %w", err)
	}
	return schedule.NameUUID("signal_trigger:" + string(canon)).String(), nil
}

// DecodeSignalTrigger decodes a stored signal trigger definition.
func DecodeSignalTrigger(def json.RawMessage) (*workflow.SignalTrigger, error) {
	var t workflow.SignalTrigger
	if err := json.Unmarshal(def, &t); err != nil {
		return nil, fmt.Errorf("decode signal trigger: %w", err)
	}
	return &t, nil
}

// SyncSignals brings a workflow's signal_trigger and signal_subscription
// rows in step with its active version and properties, inside tx, where
// the caller holds the workflow's lock (every definition change takes it,
// and so does the signal broker before it matches). A trigger the new
// active version keeps unchanged keeps its row and the signals it waits
// for; a disabled trigger (signal_trigger_disabled) keeps its row without
// subscriptions and forgets what it waited for, so that re-enabling it
// matches signals from then on; a trigger the active version lacks, and
// every trigger of a workflow without an active version, goes.
func SyncSignals(ctx context.Context, tx pgx.Tx, workflowID string) error {
	var (
		exists   bool
		version  *int64
		disabled bool
		defs     []byte
		old      []SignalTrigger
	)
	b := &pgx.Batch{}
	b.Queue(sqlSignalSyncState, workflowID).QueryRow(func(r pgx.Row) error {
		err := r.Scan(&version, &disabled, &defs)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		exists = err == nil
		return err
	})
	b.Queue(sqlSignalSyncRows, workflowID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var t SignalTrigger
			if err := rows.Scan(&t.UUID, &t.Index, &t.Version, &t.State); err != nil {
				return err
			}
			old = append(old, t)
		}
		return rows.Err()
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("read signal triggers of %s: %w", workflowID, err)
	}
	var want []SignalTrigger
	if exists && version != nil && len(defs) > 0 {
		var err error
		if want, err = desiredSignals(workflowID, *version, defs, disabled); err != nil {
			return err
		}
	}
	byUUID := make(map[string]SignalTrigger, len(old))
	for _, t := range old {
		byUUID[t.UUID] = t
	}
	changed := len(old) != len(want)
	keep := make([]string, 0, len(want))
	var active, inactive []string
	for _, w := range want {
		o, had := byUUID[w.UUID]
		if err := SignalTransition(o.State, w.State); err != nil {
			return fmt.Errorf("signal trigger %d of %s: %w", w.Index, workflowID, err)
		}
		if !had || o.Index != w.Index || o.Version != w.Version || o.State != w.State {
			changed = true
		}
		keep = append(keep, w.UUID)
		if w.State == StateActive {
			active = append(active, w.UUID)
		} else {
			inactive = append(inactive, w.UUID)
		}
	}
	if !changed {
		return nil
	}
	b = &pgx.Batch{}
	b.Queue(sqlSignalDeleteGone, workflowID, keep)
	if len(want) > 0 {
		rows, err := json.Marshal(want)
		if err != nil {
			return fmt.Errorf("encode signal triggers of %s: %w", workflowID, err)
		}
		b.Queue(sqlSignalUpsert, workflowID, rows)
		b.Queue(sqlSignalUnsubscribe, workflowID, inactive)
		b.Queue(sqlSignalSubscribe, workflowID, active)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("replace signal triggers of %s: %w", workflowID, err)
	}
	return nil
}

// desiredSignals computes the rows of a version's signal triggers. A
// trigger that repeats an earlier one of the version (validation refuses
// them; an older definition may have one) is left out: it would start
// every run twice.
func desiredSignals(workflowID string, version int64, defs []byte, disabled bool) ([]SignalTrigger, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(defs, &raws); err != nil {
		return nil, fmt.Errorf("decode signal triggers of %s version %d: %w", workflowID, version, err)
	}
	state := StateActive
	if disabled {
		state = StateDisabled
	}
	out := make([]SignalTrigger, 0, len(raws))
	seen := map[string]bool{}
	for i, raw := range raws {
		id, err := SignalTriggerUUID(raw)
		if err != nil {
			return nil, fmt.Errorf("signal trigger %d of %s version %d: %w", i, workflowID, version, err)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		t, err := DecodeSignalTrigger(raw)
		if err != nil {
			return nil, fmt.Errorf("signal trigger %d of %s version %d: %w", i, workflowID, version, err)
		}
		names := make([]string, 0, len(t.Definitions))
		for n := range t.Definitions {
			names = append(names, n)
		}
		slices.Sort(names)
		out = append(out, SignalTrigger{WorkflowID: workflowID, UUID: id, Index: i, Version: version, Definition: raw,
			Names: names, State: state})
	}
	return out, nil
}

// ListSignals returns a workflow's signal triggers in definition order
// (none when it has no active version).
func ListSignals(ctx context.Context, q Querier, workflowID string) ([]SignalTrigger, error) {
	rows, err := q.Query(ctx, sqlSignalList, workflowID)
	if err != nil {
		return nil, fmt.Errorf("list signal triggers of %s: %w", workflowID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SignalTrigger, error) {
		var (
			t   SignalTrigger
			ids []byte
		)
		err := r.Scan(&t.WorkflowID, &t.UUID, &t.Index, &t.Version, &t.Definition, &t.Names, &t.State, &t.MatchCount,
			&t.StartCount, &t.LastMatchedAt, &ids, &t.LastInstanceID, &t.Error, &t.Pending)
		if err == nil && len(ids) > 0 {
			err = json.Unmarshal(ids, &t.LastSignalIDs)
		}
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list signal triggers of %s: %w", workflowID, err)
	}
	return out, nil
}
