package flowstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// The per-node writer (group commit). Actors do not write their state
// themselves: they hand each write to the node's Writer, which merges the
// writes of every run waiting at that moment into one multi-row statement
// per kind (step inserts, step updates, run updates) and one commit. While
// a transaction is in flight, the next writes queue up and go together in
// the next one, so the commits come as fast as the database takes them
// (about one a millisecond under load) and each carries as many
// transitions as arrived meanwhile, up to MaxBatch.
//
// Every guarantee of a single write holds for each row of a batch: it is
// fenced on its own (a refused row does not fail the others, and reports
// run.ErrFenced to its own writer), it records its event and (a successful
// attempt's) output signals in the same statement, a refused row neither,
// and its writer is told only once the commit is durable. A batch that
// fails as a whole (a constraint or trigger violation of one row) is
// written again one op at a time, so that only the faulty op fails.

// WriterConfig configures a Writer.
type WriterConfig struct {
	// MaxBatch bounds the ops of one transaction (default 512).
	MaxBatch int
	// Pipelines is how many transactions may be in flight at once
	// (default 1). Ops ordered after one another (Op.After) never share
	// two concurrent transactions: an op goes out only once its
	// predecessor has committed, or with it. A transaction beyond the
	// first is started only for an op somebody waits for (not Behind),
	// and only while the database is far (RemoteCommit) or, with
	// AwaitedWait set, once the transaction in flight has taken that
	// long: a recorded intent or a run's end then does not wait for a
	// commit in flight before its own, while writes behind still ride in
	// the next commit. Near the database, more transactions would only
	// cost CPU: one batch at a time carries everything.
	Pipelines int
	// RemoteCommit is the fastest recent commit from which the writer
	// takes the database to be a network away and opens its further
	// pipelines (default DefaultRemoteCommit; negative: always).
	RemoteCommit time.Duration
	// AwaitedWait, when positive, is how long near the database the
	// newest transaction in flight may hold back an op somebody waits for
	// before a further pipeline takes it, with the writes of its run
	// queued before it (a run's start written behind, then its first
	// step's recorded intent). Zero or negative (the default): never,
	// one transaction at a time near the database. On this project's
	// loaded 2-core machine it added commits and no latency
	// (docs/performance.md, "Awaited writes and a slow transaction"); it
	// is there to be measured where a quiet database's burst holds an
	// intent behind a long transaction.
	AwaitedWait time.Duration
	// Linger is how long an idle writer may hold back ops nobody waits
	// for (Op.Behind), to send them with the writes that follow them: an
	// attempt's terminal write, written behind, then shares its commit
	// with the next step's first write. Any op somebody waits for ends
	// the lingering at once. Default DefaultLinger; negative: none.
	Linger time.Duration
	// Logger is told of transient failures the writer retries.
	Logger *slog.Logger
}

// DefaultRemoteCommit is WriterConfig.RemoteCommit's default: a commit on
// the same machine takes tens to hundreds of microseconds, one across a
// network (Aurora's, across availability zones) one to two milliseconds.
const DefaultRemoteCommit = time.Millisecond

// commitWindow is how many commits the writer's fastest recent commit is
// taken over (this window's and the previous one's).
const commitWindow = 64

// DefaultLinger is WriterConfig.Linger's default: about what a flow
// takes to start a step after its predecessor ended.
const DefaultLinger = 250 * time.Microsecond

// Writer is a node's group-commit writer. Start it before submitting ops;
// Stop ends it once the ops submitted have been written.
type Writer struct {
	db  *pgxpool.Pool
	cfg WriterConfig

	mu       sync.Mutex
	queue    []*Op
	inflight int
	// The fastest commit of this window of commitWindow commits and of
	// the previous one (0: none yet), for RemoteCommit.
	fastest, fastestBefore time.Duration
	commits                int
	// lastSent is when the newest transaction went out, for AwaitedWait.
	lastSent time.Time
	stats    Stats
	// awaited counts the ops queued that are not Behind.
	awaited  int
	wake     chan struct{}
	closed   bool
	wg       sync.WaitGroup
	stopOnce sync.Once
	ctx      context.Context
	cancel   context.CancelFunc
}

// NewWriter builds a writer over db.
func NewWriter(db *pgxpool.Pool, cfg WriterConfig) *Writer {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.Pipelines <= 0 {
		cfg.Pipelines = 1
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.RemoteCommit == 0 {
		cfg.RemoteCommit = DefaultRemoteCommit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Writer{db: db, cfg: cfg, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

// Start starts the writer's loop; it does not block.
func (w *Writer) Start(context.Context) error {
	w.wg.Add(1)
	go w.loop()
	return nil
}

// Stop writes what is queued, refuses new ops and waits. Idempotent.
func (w *Writer) Stop() {
	w.stopOnce.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		w.signal()
		w.wg.Wait()
		w.cancel()
	})
}

// ErrPredecessorFailed fails, unwritten, an op ordered after one that
// failed (Op.After); the error wraps the predecessor's as well.
var ErrPredecessorFailed = errors.New("a write ordered before this one failed")

func afterFailed(err error) error {
	if errors.Is(err, ErrPredecessorFailed) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrPredecessorFailed, err)
}

// errWriterStopped fails ops submitted after Stop.
var errWriterStopped = errors.New("flow store writer stopped")

type opKind uint8

const (
	opStepInsert opKind = iota
	opStepUpdate
	opInstanceUpdate
)

// Op is one state write: a step attempt's insert or update, or a run's
// update, fenced by the generation of the run's flow group.
type Op struct {
	kind    opKind
	ctx     context.Context
	ref     run.Ref
	group   int32
	gen     int64
	stepID  string
	attempt int64
	uuid    string
	typ     string
	step    StepWrite
	inst    InstanceUpdate
	// after is the op this one is ordered after: it never commits before
	// it, and fails if it failed.
	after *Op
	// then runs in the op's transaction once its row is written.
	then []func(context.Context, pgx.Tx) error
	// ack is the queue message the op's transaction deletes (Acks).
	ack *ack

	// behind: nobody waits for the op (Behind).
	behind bool
	// Guarded by the writer's mu until done is closed.
	queued time.Time
	sent   bool
	sentAt time.Time
	err    error
	done   chan struct{}
	cbs    []func(error)
}

// InsertStepOp is the first write of a step attempt (ref's run, in flow
// group group at generation gen).
func InsertStepOp(ctx context.Context, ref run.Ref, group int32, gen int64, stepID string, attempt int64, uuid, stepType string, sw StepWrite) *Op {
	return &Op{kind: opStepInsert, ctx: ctx, ref: ref, group: group, gen: gen, stepID: stepID, attempt: attempt,
		uuid: uuid, typ: stepType, step: sw, done: make(chan struct{})}
}

// UpdateStepOp is a later write of a step attempt; the stored seq must be
// sw.Seq-1.
func UpdateStepOp(ctx context.Context, ref run.Ref, group int32, gen int64, stepID string, attempt int64, sw StepWrite) *Op {
	return &Op{kind: opStepUpdate, ctx: ctx, ref: ref, group: group, gen: gen, stepID: stepID, attempt: attempt,
		step: sw, done: make(chan struct{})}
}

// UpdateInstanceOp is a write of a run's own state; the run must be in
// u.From.
func UpdateInstanceOp(ctx context.Context, ref run.Ref, group int32, gen int64, u InstanceUpdate) *Op {
	return &Op{kind: opInstanceUpdate, ctx: ctx, ref: ref, group: group, gen: gen, inst: u, done: make(chan struct{})}
}

// After orders op after prev (nil: no order): op is written in prev's
// transaction or a later one, and fails with prev's error if prev failed.
func (op *Op) After(prev *Op) *Op {
	op.after = prev
	return op
}

// Behind marks an op nobody waits for: an idle writer may hold it back
// for up to its Linger, to send it with the writes that follow it.
func (op *Op) Behind() *Op {
	op.behind = true
	return op
}

// IsBehind reports an op marked Behind.
func (op *Op) IsBehind() bool { return op.behind }

// Then adds a write to the op's transaction, run once the op's own row is
// written (a queue message it announces, for example). An error fails the
// op, and the op alone: the others of its batch are written again without
// it.
func (op *Op) Then(f func(context.Context, pgx.Tx) error) *Op {
	op.then = append(op.then, f)
	return op
}

// ack is a claimed queue message and the node holding its claim.
type ack struct {
	queue queue.ID
	id    int64
	node  string
}

// Acks deletes the queue message m, claimed by node, in the op's
// transaction (queue.AckSQL), fenced like the op by its group's
// generation: the message is gone once the op's batch has committed with
// the group still held (whether or not the op's own guard let its row be
// written), and stays if the group has moved on or the batch failed. Set
// before Submit.
func (op *Op) Acks(m queue.Message, node string) *Op {
	op.ack = &ack{queue: m.Queue, id: m.ID, node: node}
	return op
}

// OnDone registers f to be called, on the writer's goroutine, once the
// op's outcome is known: nil when it committed, run.ErrFenced when its fence
// refused it, else the error. Register before Submit.
func (op *Op) OnDone(f func(error)) *Op {
	op.cbs = append(op.cbs, f)
	return op
}

// Wait blocks until the op's outcome is known or ctx ends.
func (op *Op) Wait(ctx context.Context) error {
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Failed is the op's error once it has failed; nil while it is pending,
// once it has committed, or for no op.
func (op *Op) Failed() error {
	if op == nil {
		return nil
	}
	select {
	case <-op.done:
		return op.err
	default:
		return nil
	}
}

// Done is closed once the op's outcome is known.
func (op *Op) Done() <-chan struct{} { return op.done }

// Err is the op's outcome once Done is closed.
func (op *Op) Err() error {
	<-op.done
	return op.err
}

// Submit queues ops, in order, for the next transaction.
func (w *Writer) Submit(ops ...*Op) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		for _, op := range ops {
			w.finish(op, errWriterStopped)
		}
		return
	}
	now := time.Now()
	for _, op := range ops {
		op.queued = now
		if !op.behind {
			w.awaited++
		}
	}
	w.queue = append(w.queue, ops...)
	w.mu.Unlock()
	w.signal()
}

// lingerFor is how long the writer may still hold back its queue: while
// it is idle and every op queued is behind, up to Linger after the oldest
// was queued. 0: take a batch now.
func (w *Writer) lingerFor() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cfg.Linger <= 0 || w.inflight > 0 || w.closed || len(w.queue) == 0 {
		return 0
	}
	for _, op := range w.queue {
		if !op.behind {
			return 0
		}
	}
	return max(0, time.Until(w.queue[0].queued.Add(w.cfg.Linger)))
}

// Write submits op and waits for its outcome.
func (w *Writer) Write(ctx context.Context, op *Op) error {
	w.Submit(op)
	return op.Wait(ctx)
}

func (w *Writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Writer) finish(op *Op, err error) {
	w.mu.Lock()
	op.err = err
	if err == nil && !op.behind && op.sent {
		w.stats.Awaited++
		w.stats.AwaitedQueued += op.sentAt.Sub(op.queued)
		w.stats.AwaitedInTx += time.Since(op.sentAt)
	}
	w.mu.Unlock()
	close(op.done)
	for _, f := range op.cbs {
		f(err)
	}
	// Nothing reads a finished op's payload, and a run keeps its start op
	// (its writes are ordered after it) for as long as it lives: keep only
	// the outcome.
	op.step, op.inst, op.then, op.cbs, op.after = StepWrite{}, InstanceUpdate{}, nil, nil, nil
}

// sleep waits d, or less if an op is submitted meanwhile (w.wake).
func (w *Writer) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.wake:
	case <-t.C:
	}
}

func (w *Writer) loop() {
	defer w.wg.Done()
	var running sync.WaitGroup
	defer running.Wait()
	for {
		for {
			if d := w.lingerFor(); d > 0 {
				w.sleep(d)
				continue
			}
			batch, failed, retry := w.take()
			for _, f := range failed {
				w.finish(f.op, f.err)
			}
			if len(batch) == 0 {
				if len(failed) > 0 {
					// Their successors still queued fail now too, not
					// at the next op someone submits.
					continue
				}
				if retry > 0 {
					// An op somebody waits for, held back by the
					// transaction in flight for up to AwaitedWait.
					w.sleep(retry)
					continue
				}
				break
			}
			running.Add(1)
			go func() {
				defer running.Done()
				w.exec(batch)
				w.mu.Lock()
				w.inflight--
				w.mu.Unlock()
				w.signal()
			}()
		}
		w.mu.Lock()
		idle := w.closed && len(w.queue) == 0 && w.inflight == 0
		w.mu.Unlock()
		if idle {
			return
		}
		<-w.wake
	}
}

type failedOp struct {
	op  *Op
	err error
}

// take removes the next batch from the queue, in order: up to MaxBatch
// ops whose predecessor (After) has committed or is in the batch, at most
// one write per row. An op whose predecessor failed fails with it. retry,
// when no batch is taken, is how long until an op somebody waits for may
// go in a further transaction (AwaitedWait).
func (w *Writer) take() (batch []*Op, failed []failedOp, retry time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inflight >= w.cfg.Pipelines || len(w.queue) == 0 {
		return nil, nil, 0
	}
	if w.inflight > 0 {
		// Another transaction while one is in flight is for a write
		// somebody waits for (a recorded intent, a run's end), with the
		// database a network away or the transaction in flight slow:
		// writes behind wait for the next commit, where they cost no
		// transaction of their own.
		switch {
		case w.remote():
			if !w.awaitedReady(false) {
				return nil, nil, 0
			}
		case w.cfg.AwaitedWait > 0:
			if !w.awaitedReady(true) {
				return nil, nil, 0
			}
			if d := time.Until(w.lastSent.Add(w.cfg.AwaitedWait)); d > 0 {
				return nil, nil, d
			}
		default:
			return nil, nil, 0
		}
	}
	in := make(map[*Op]bool)
	rows := make(map[rowKey]bool)
	rest := w.queue[:0]
	now := time.Now()
	for _, op := range w.queue {
		if p := op.after; p != nil && !in[p] {
			select {
			case <-p.done:
				if p.err != nil {
					// Its own successors fail with it in a later round.
					failed = append(failed, failedOp{op, afterFailed(p.err)})
					continue
				}
			default:
				rest = append(rest, op)
				continue
			}
		}
		k := op.row()
		if len(batch) >= w.cfg.MaxBatch || rows[k] {
			rest = append(rest, op)
			continue
		}
		rows[k] = true
		in[op] = true
		op.sent, op.sentAt = true, now
		batch = append(batch, op)
	}
	clear(w.queue[len(rest):])
	w.queue = rest
	w.awaited = 0
	for _, op := range rest {
		if !op.behind {
			w.awaited++
		}
	}
	if len(batch) > 0 {
		w.stats.Transactions++
		if w.inflight > 0 {
			w.stats.Beside++
		}
		w.inflight++
		w.lastSent = now
	}
	return batch, failed, 0
}

// Stats counts what a writer did since it started, for benchmarks: where
// the time of the writes somebody waits for goes.
type Stats struct {
	// Transactions is how many transactions went out (a batch retried
	// counts once), Beside how many of them while another was in flight.
	Transactions, Beside int64
	// Awaited is how many ops somebody waited for (not Behind) committed;
	// AwaitedQueued their total time queued before their transaction
	// went out, AwaitedInTx their total time from then to its commit
	// (the ops' outcome known).
	Awaited                    int64
	AwaitedQueued, AwaitedInTx time.Duration
}

// Stats is what the writer did so far.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// remote reports whether the fastest recent commit took RemoteCommit or
// longer: the database is a network away. Called with mu held.
func (w *Writer) remote() bool {
	if w.cfg.RemoteCommit < 0 {
		return true
	}
	fastest := w.fastest
	if w.fastestBefore > 0 && (fastest == 0 || w.fastestBefore < fastest) {
		fastest = w.fastestBefore
	}
	return fastest >= w.cfg.RemoteCommit
}

// committed records how long a transaction took, for remote.
func (w *Writer) committed(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fastest == 0 || d < w.fastest {
		w.fastest = d
	}
	if w.commits++; w.commits >= commitWindow {
		w.fastestBefore, w.fastest, w.commits = w.fastest, 0, 0
	}
}

// awaitedReady reports whether the queue holds an op somebody waits for
// (not Behind) that may go now: its predecessor (Op.After) committed, or,
// with chain, is queued and may go itself (a run's start written behind,
// then its first step's recorded intent: both go, in order). One whose
// predecessor is in flight waits for it anyway. A database a network away
// opens a transaction only for the first kind: with chains too, on this
// project's loaded machine, a burst of Http steps made 0.2 more commits
// per step and waited no less. Called with mu held.
func (w *Writer) awaitedReady(chain bool) bool {
	if w.awaited == 0 {
		// Only writes behind are queued: no scan of a long queue on
		// every op submitted while a transaction is in flight.
		return false
	}
	var goes map[*Op]bool // ops behind that may go now
	for _, op := range w.queue {
		if p := op.after; p != nil && !goes[p] {
			select {
			case <-p.done:
			default:
				continue
			}
		}
		if !op.behind {
			return true
		}
		if !chain {
			continue
		}
		if goes == nil {
			goes = make(map[*Op]bool)
		}
		goes[op] = true
	}
	return false
}

// rowKey names the row an op writes.
type rowKey struct {
	ref     run.Ref
	stepID  string
	attempt int64
}

func (op *Op) row() rowKey {
	if op.kind == opInstanceUpdate {
		return rowKey{ref: op.ref}
	}
	return rowKey{ref: op.ref, stepID: op.stepID, attempt: op.attempt}
}

// batchTimeout bounds one transaction; a write that gets no answer is
// tried again (its guards refuse what a first try committed).
const batchTimeout = 30 * time.Second

// exec writes a batch, retrying transient failures while its ops' callers
// wait, and isolating a batch that fails as a whole.
func (w *Writer) exec(batch []*Op) {
	backoff := 20 * time.Millisecond
	for {
		live := batch[:0]
		for _, op := range batch {
			if err := op.ctx.Err(); err != nil {
				w.finish(op, err)
				continue
			}
			if err := op.after.Failed(); err != nil {
				// Its predecessor shared its batch and failed (an op
				// written on its own after the batch failed as a whole).
				w.finish(op, afterFailed(err))
				continue
			}
			live = append(live, op)
		}
		batch = live
		if len(batch) == 0 {
			return
		}
		written, err := w.try(batch)
		if err == nil {
			for _, op := range batch {
				if written[op] {
					w.finish(op, nil)
				} else {
					w.finish(op, run.ErrFenced)
				}
			}
			return
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) || errors.Is(err, errThen) {
			// The batch is wrong, not the database: one op's write or its
			// Then. Each op on its own finds which.
			if len(batch) == 1 {
				w.finish(batch[0], err)
				return
			}
			for _, op := range batch {
				w.exec([]*Op{op})
			}
			return
		}
		if w.ctx.Err() != nil {
			for _, op := range batch {
				w.finish(op, err)
			}
			return
		}
		w.cfg.Logger.Warn("state write failed; retrying", "ops", len(batch), "error", err.Error())
		select {
		case <-time.After(backoff):
		case <-w.ctx.Done():
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// errThen marks the failure of an op's Then.
var errThen = errors.New("write announced with the state write failed")

// try writes the batch in one transaction and reports which ops' rows were
// written.
func (w *Writer) try(batch []*Op) (map[*Op]bool, error) {
	ctx, cancel := context.WithTimeout(w.ctx, batchTimeout)
	defer cancel()
	start := time.Now()
	written, err := execBatch(ctx, w.db, batch)
	if err == nil {
		w.committed(time.Since(start))
	}
	return written, err
}
