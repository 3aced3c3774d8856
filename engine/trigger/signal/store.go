package signal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// matchPage is how many signals one query reads while looking for a match.
const matchPage = 200

// Store reads and writes signals and the waits of steps.
type Store struct {
	db *pgxpool.Pool
}

// NewStore returns a store over db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

// Querier is what the reads need: a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// QueueLockNames queues, in b, taking the advisory locks of names for the
// rest of the transaction: exclusive to match new signals against the
// waiting steps, shared to check a step's dependencies (see lockClass).
func QueueLockNames(b *pgx.Batch, names []string, exclusive bool) {
	sql := sqlLockNamesShared
	if exclusive {
		sql = sqlLockNames
	}
	b.Queue(sql, lockClass, names)
}

// Inserted is what storing a batch of requests did to each.
type Inserted struct {
	// Signal is the stored signal: the new one, or for a duplicate the one
	// stored before.
	Signal *Signal
	// Duplicate: the name and instance id were stored before (or earlier
	// in the batch); nothing was written.
	Duplicate bool
}

// Insertion is a queued insert of a batch of requests (QueueInsert).
type Insertion struct {
	ids []string
	out []Inserted
}

// QueueInsert queues, in b, storing checked requests (Request.Check). Once
// b has run, Finish reads the duplicates' stored signals. A request without
// a request time gets the transaction's.
func QueueInsert(b *pgx.Batch, reqs []Request) *Insertion {
	n := len(reqs)
	ins := &Insertion{ids: make([]string, n), out: make([]Inserted, n)}
	names, rids := make([]string, n), make([]string, n)
	params, payloads, times := make([]map[string]any, n), make([]map[string]any, n), make([]*time.Time, n)
	// The first request of each name and instance id, the one stored when
	// it is new.
	first := make(map[[2]string]int, n)
	for i := range reqs {
		r := &reqs[i]
		ins.ids[i] = r.InstanceID()
		names[i], rids[i] = r.Name, r.RequestID
		params[i], payloads[i] = orEmpty(r.Params), orEmpty(r.Payload)
		if !r.RequestTime.IsZero() {
			times[i] = &r.RequestTime
		}
		ins.out[i] = Inserted{Signal: &Signal{Name: r.Name, InstanceID: ins.ids[i], Params: params[i], Payload: payloads[i],
			RequestID: r.RequestID}, Duplicate: true}
		if _, seen := first[[2]string{r.Name, ins.ids[i]}]; !seen {
			first[[2]string{r.Name, ins.ids[i]}] = i
		}
	}
	b.Queue(sqlInsertSignals, names, ins.ids, rids, params, payloads, times).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var seq int64
			var name, id string
			var requested, created time.Time
			if err := rows.Scan(&seq, &name, &id, &requested, &created); err != nil {
				return err
			}
			o := &ins.out[first[[2]string{name, id}]]
			o.Signal.Seq, o.Signal.RequestTime, o.Signal.CreateTime, o.Duplicate = seq, requested, created, false
		}
		return rows.Err()
	})
	return ins
}

// Finish reads the stored signals of the duplicates, inside the
// transaction that ran the insert, and returns one result per request.
func (ins *Insertion) Finish(ctx context.Context, q Querier) ([]Inserted, error) {
	var names, ids []string
	for i, o := range ins.out {
		if o.Duplicate {
			names, ids = append(names, o.Signal.Name), append(ids, ins.ids[i])
		}
	}
	if len(names) == 0 {
		return ins.out, nil
	}
	rows, err := q.Query(ctx, sqlSignalsByKey, names, ids)
	if err != nil {
		return nil, fmt.Errorf("read %d duplicate signals: %w", len(names), err)
	}
	stored, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Signal, error) { return scanSignal(r) })
	if err != nil {
		return nil, fmt.Errorf("read %d duplicate signals: %w", len(names), err)
	}
	byKey := make(map[[2]string]*Signal, len(stored))
	for _, s := range stored {
		byKey[[2]string{s.Name, s.InstanceID}] = s
	}
	for i := range ins.out {
		if o := &ins.out[i]; o.Duplicate {
			s := byKey[[2]string{o.Signal.Name, ins.ids[i]}]
			if s == nil {
				return nil, fmt.Errorf("signal %q instance %s: neither inserted nor stored", o.Signal.Name, ins.ids[i])
			}
			o.Signal = s
		}
	}
	return ins.out, nil
}

// Waiters are the step attempts waiting for signals of some names (see
// QueueWaiters), each with the names it waits for.
type Waiters []Waiter

// QueueWaiters queues, in b, finding the step attempts waiting for signals
// of any of names (after the names' exclusive locks). Rows of attempts
// that ended while waiting are closed on the way.
func QueueWaiters(b *pgx.Batch, names []string, out *Waiters) {
	b.Queue(sqlWaiters, names, endedStatuses).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var w Waiter
			if err := rows.Scan(&w.WorkflowID, &w.InstanceID, &w.RunID, &w.StepID, &w.Group, &w.Names); err != nil {
				return err
			}
			*out = append(*out, w)
		}
		return rows.Err()
	})
}

// For returns the waiters that wait for any of names.
func (ws Waiters) For(names map[string]bool) []Waiter {
	var out []Waiter
	for _, w := range ws {
		for _, n := range w.Names {
			if names[n] {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

// Bypass records, inside tx, that user bypassed the signal dependencies of
// a waiting attempt. It reports false when the attempt is not (or no
// longer) waiting, or was bypassed already.
func Bypass(ctx context.Context, tx pgx.Tx, k WaitKey, user string) (bool, error) {
	tag, err := tx.Exec(ctx, sqlBypass, k.WorkflowID, k.InstanceID, k.RunID, k.StepID, k.AttemptID, user)
	if err != nil {
		return false, fmt.Errorf("bypass signal dependencies of step %s attempt %d: %w", k.StepID, k.AttemptID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Latest returns the newest signal of name.
func (s *Store) Latest(ctx context.Context, name string) (*Signal, error) {
	sig, err := scanSignal(s.db.QueryRow(ctx, sqlSignalsBefore, name, int64(1<<63-1), 1))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("signal %q: %w", name, ErrNotFound)
	}
	return sig, err
}

// Get returns the signal of name with seq id seq.
func (s *Store) Get(ctx context.Context, name string, seq int64) (*Signal, error) {
	sig, err := scanSignal(s.db.QueryRow(ctx, sqlSignalBySeq, name, seq))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("signal %q instance %d: %w", name, seq, ErrNotFound)
	}
	return sig, err
}

// MaxListScan bounds how many signals one List reads while filtering, so
// that a filter nothing matches costs a bounded read.
const MaxListScan = 10_000

// List returns up to limit signals of name older than before (seq),
// newest first, that satisfy every filter (match params, as a
// dependency's), and the seq to pass as before for the next page (0 when
// there is none). A filtered list reads at most MaxListScan signals; next
// is where it stopped.
func (s *Store) List(ctx context.Context, name string, before int64, limit int, filters []Match) ([]*Signal, int64, error) {
	if before <= 0 {
		before = int64(1<<63 - 1)
	}
	dep := Dependency{Name: name, Matches: filters}
	page := limit + 1
	if len(filters) > 0 {
		page = matchPage
	}
	var out []*Signal
	for scanned := 0; ; {
		rows, err := s.db.Query(ctx, sqlSignalsBefore, name, before, page)
		if err != nil {
			return nil, 0, fmt.Errorf("list signals %q: %w", name, err)
		}
		sigs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Signal, error) { return scanSignal(r) })
		if err != nil {
			return nil, 0, fmt.Errorf("list signals %q: %w", name, err)
		}
		for _, sig := range sigs {
			if dep.Satisfied(sig.Params) {
				if len(out) == limit {
					return out, out[limit-1].Seq, nil
				}
				out = append(out, sig)
			}
			before = sig.Seq
			scanned++
		}
		if len(sigs) < page {
			return out, 0, nil
		}
		if scanned >= MaxListScan {
			return out, before, nil
		}
	}
}

// BySeq reads signals by seq inside q (a pool or a transaction).
func BySeq(ctx context.Context, q Querier, seqs []int64) (map[int64]*Signal, error) {
	out := make(map[int64]*Signal, len(seqs))
	if len(seqs) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, sqlSignalsBySeq, seqs)
	if err != nil {
		return nil, fmt.Errorf("read %d signals: %w", len(seqs), err)
	}
	sigs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Signal, error) { return scanSignal(r) })
	if err != nil {
		return nil, fmt.Errorf("read %d signals: %w", len(seqs), err)
	}
	for _, s := range sigs {
		out[s.Seq] = s
	}
	return out, nil
}

// Matched returns what a closed wait recorded per dependency, in
// dependency order (none when the attempt has no closed wait).
func (s *Store) Matched(ctx context.Context, k WaitKey) ([]Ref, error) {
	var raw []byte
	err := s.db.QueryRow(ctx, sqlMatched, k.WorkflowID, k.InstanceID, k.RunID, k.StepID, k.AttemptID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the signals matched by step %s attempt %d: %w", k.StepID, k.AttemptID, err)
	}
	var refs []Ref
	if err := json.Unmarshal(raw, &refs); err != nil {
		return nil, fmt.Errorf("decode the signals matched by step %s attempt %d: %w", k.StepID, k.AttemptID, err)
	}
	return refs, nil
}

// Check registers an attempt as waiting for deps (idempotently; group is
// the flow group that owns its run) and matches deps against the stored
// signals, in one transaction that holds the names' shared locks (see
// lockClass). When the dependencies are met or were bypassed, the wait is
// closed and the matched signals are recorded on it.
func (s *Store) Check(ctx context.Context, k WaitKey, group int32, deps []Dependency) (CheckResult, error) {
	var res CheckResult
	names := make([]string, 0, len(deps))
	for _, d := range deps {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		res = CheckResult{Matched: make([]*Signal, len(deps))}
		if _, err := tx.Exec(ctx, sqlLockNamesShared, lockClass, names); err != nil {
			return fmt.Errorf("lock signal names %v: %w", names, err)
		}
		if err := tx.QueryRow(ctx, sqlRegister, k.WorkflowID, k.InstanceID, k.RunID, k.StepID, k.AttemptID, group, names).
			Scan(&res.Since, &res.BypassedBy); err != nil {
			return fmt.Errorf("register signal wait: %w", err)
		}
		res.Met = true
		for i, d := range deps {
			sig, err := match(ctx, tx, d)
			if err != nil {
				return err
			}
			res.Matched[i] = sig
			res.Met = res.Met && sig != nil
		}
		if !res.Met && res.BypassedBy == "" {
			return nil
		}
		matched, _ := json.Marshal(matchedRefs(deps, res.Matched))
		_, err := tx.Exec(ctx, sqlDone, k.WorkflowID, k.InstanceID, k.RunID, k.StepID, k.AttemptID, matched)
		if err != nil {
			return fmt.Errorf("close signal wait: %w", err)
		}
		return nil
	})
	if err != nil {
		return CheckResult{}, fmt.Errorf("check signal dependencies of step %s attempt %d: %w", k.StepID, k.AttemptID, err)
	}
	return res, nil
}

// match returns the newest signal satisfying d, or nil.
func match(ctx context.Context, tx pgx.Tx, d Dependency) (*Signal, error) {
	before := int64(1<<63 - 1)
	for {
		rows, err := tx.Query(ctx, sqlSignalsBefore, d.Name, before, matchPage)
		if err != nil {
			return nil, fmt.Errorf("read signals %q: %w", d.Name, err)
		}
		page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Signal, error) { return scanSignal(r) })
		if err != nil {
			return nil, fmt.Errorf("read signals %q: %w", d.Name, err)
		}
		for _, s := range page {
			if d.Satisfied(s.Params) {
				return s, nil
			}
		}
		if len(page) < matchPage {
			return nil, nil
		}
		before = page[len(page)-1].Seq
	}
}

// Ref names a signal instance: a closed wait records one per dependency
// (Seq 0 where a bypass let the step go on without a match).
type Ref struct {
	Name string `json:"name"`
	Seq  int64  `json:"seq_id,omitempty"`
}

func matchedRefs(deps []Dependency, sigs []*Signal) []Ref {
	out := make([]Ref, len(deps))
	for i, d := range deps {
		out[i].Name = d.Name
		if sigs[i] != nil {
			out[i].Seq = sigs[i].Seq
		}
	}
	return out
}

func scanSignal(row pgx.Row) (*Signal, error) {
	var (
		s               Signal
		params, payload []byte
	)
	if err := row.Scan(&s.Seq, &s.Name, &s.InstanceID, &params, &payload, &s.RequestID, &s.RequestTime, &s.CreateTime); err != nil {
		return nil, err
	}
	var err error
	if s.Params, err = DecodeParams(params); err != nil {
		return nil, fmt.Errorf("decode params of signal %d: %w", s.Seq, err)
	}
	if s.Payload, err = decodeObject(payload); err != nil {
		return nil, fmt.Errorf("decode payload of signal %d: %w", s.Seq, err)
	}
	return &s, nil
}

// DecodeParams decodes a signal's stored params: strings, and integers as
// int64 (Request.Check admits nothing else).
func DecodeParams(raw []byte) (map[string]any, error) {
	ps, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	for k, v := range ps {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				ps[k] = i
			}
		}
	}
	return ps, nil
}

// decodeObject decodes a JSON object keeping numbers exact.
func decodeObject(b []byte) (map[string]any, error) {
	out := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
