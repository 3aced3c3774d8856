package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-aws/maestro/engine/tracing"
)

// Handler processes one claimed message. Returning nil deletes the message;
// an error leaves it to be offered again after the retry delay; ErrHandedOff
// says the handler has taken the message over. Handlers must be idempotent:
// a message may be delivered more than once.
type Handler func(ctx context.Context, m Message) error

// ErrHandedOff, returned by a handler, says that the handler has handed
// the message to a write still in flight which deletes it in its own
// transaction (AckSQL): the worker neither deletes nor defers it, and goes
// on to the next message without waiting for that commit. When the write
// settles its owner calls Worker.Settled. Until then the message stays
// claimed by this node (or, handled from its notification, pending here),
// so no other delivery handles it.
var ErrHandedOff = errors.New("queue: message handed off to a write in flight")

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Node names this process in claims. Required.
	Node string
	// Store claims and deletes messages. Required.
	Store *Store
	// Listen opens a dedicated connection for LISTEN. Required.
	Listen func(ctx context.Context) (*pgx.Conn, error)
	// Groups returns the flow groups this node owns now. Required.
	Groups func() []int32
	// Owns reports whether this node owns a group now. Required.
	Owns func(group int32) bool
	// Handlers by queue id. Messages of other queues are left alone.
	Handlers map[ID]Handler
	// ClaimReads are reads sent with the claims of some queues' messages
	// (Store.ClaimWith): their handler finds the result in Message.Read.
	ClaimReads map[ID]*ClaimRead
	// Noted hands a message of some queues to its handler from what its
	// notification carried (Message.Note), without claiming it: ok false
	// (the note is not enough) claims it as usual. The handler's write
	// must then delete it with AckSQL, fenced like the write, and must
	// let no other node's work through (a start's guard): until the
	// handler is done the message is only pending on this node, and a
	// failure leaves it for the sweep (or Defer) to offer again.
	Noted map[ID]func(Message) (Message, bool)
	// WorkersPerQueue is how many messages of one queue run at once
	// (default 4).
	WorkersPerQueue int
	// QueueWorkers overrides WorkersPerQueue for some queues: one whose
	// handler mostly waits (for a group commit) rather than works.
	QueueWorkers map[ID]int
	// ClaimTTL is how long a claim lasts before the sweeper re-offers the
	// message (default 30s).
	ClaimTTL time.Duration
	// RetryDelay is how long a failed message waits (default 1s).
	RetryDelay time.Duration
	// SweepInterval is how often unclaimed messages are looked for
	// (default 1s). The periodic sweep leaves a message nobody has claimed
	// to its notification for one interval; the sweeps when the listener
	// (re)connects and when groups are claimed (Sweep) take every one.
	SweepInterval time.Duration
	// Notifications are extra pg_notify channels the listener subscribes to
	// on its connection, with what to do with a payload.
	Notifications map[string]func(payload string)
	// OnListen, when set, is told when the listener starts (true) and stops
	// (false) receiving notifications; what a consumer cached from them is
	// only current while it receives them.
	OnListen func(listening bool)
	// Logger is required.
	Logger *slog.Logger
}

func (c *WorkerConfig) validate() error {
	if c.Node == "" || c.Store == nil || c.Listen == nil || c.Groups == nil || c.Owns == nil || c.Logger == nil {
		return errors.New("queue: WorkerConfig needs Node, Store, Listen, Groups, Owns and Logger")
	}
	if c.WorkersPerQueue <= 0 {
		c.WorkersPerQueue = 4
	}
	if c.ClaimTTL <= 0 {
		c.ClaimTTL = 30 * time.Second
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = time.Second
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = time.Second
	}
	return nil
}

// Worker receives messages three ways: Offer from producers in this process
// right after their commit, LISTEN notifications from other processes, and
// the periodic sweep. Each is claimed before it is processed, so a message
// offered twice runs once at a time.
type Worker struct {
	cfg    WorkerConfig
	lanes  map[ID]chan delivery
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	// pending are the messages in a lane or in a handler here, so that a
	// message reaches a handler once however many ways it arrives: a
	// second notification or offer of a pending message is dropped, and
	// the sweep leaves pending messages alone (ClaimDue's exclude). Were it
	// not, under a burst a message waiting in its lane longer than the
	// sweep's grace would be claimed by the sweep and again by its
	// notification's worker (one UPDATE wasted, the message queued twice).
	mu      sync.Mutex
	pending map[msgKey]*flight
}

type msgKey struct {
	q  ID
	id int64
}

// flight is a pending message: claimed once the sweep has claimed it
// while its notification's copy waited in a lane (that copy then uses the
// sweep's claim, m, instead of claiming it again).
type flight struct {
	claimed bool
	m       Message
}

// delivery is a message on its way to a handler; claimed says whether this
// node already holds the claim.
type delivery struct {
	m       Message
	claimed bool
}

// NewWorker validates cfg.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, lanes: map[ID]chan delivery{}, pending: map[msgKey]*flight{}}
	for q := range cfg.Handlers {
		w.lanes[q] = make(chan delivery, 1024)
	}
	return w, nil
}

// Start starts the listener, the sweeper and the workers; it does not block.
func (w *Worker) Start(ctx context.Context) error {
	ctx, w.cancel = context.WithCancel(ctx)
	for q, lane := range w.lanes {
		n := w.cfg.WorkersPerQueue
		if m := w.cfg.QueueWorkers[q]; m > 0 {
			n = m
		}
		for range n {
			w.wg.Add(1)
			go w.work(ctx, w.cfg.Handlers[q], lane)
		}
	}
	w.wg.Add(2)
	go w.listen(ctx)
	go w.sweep(ctx)
	return nil
}

// Stop stops everything and waits for handlers in flight. Idempotent.
func (w *Worker) Stop() {
	w.once.Do(func() {
		if w.cancel != nil {
			w.cancel()
		}
		w.wg.Wait()
	})
}

// Offer hands a committed message to this node's workers at once.
func (w *Worker) Offer(m Message) {
	w.deliver(delivery{m: m})
}

// Sweep looks for unclaimed messages now instead of waiting for the next
// tick; the engine calls it after claiming groups.
func (w *Worker) Sweep(ctx context.Context) {
	w.sweepOnce(ctx, 0)
}

// deliver puts d in its lane unless the message is pending here already;
// it reports false when d, claimed, must be released (its lane is full).
func (w *Worker) deliver(d delivery) bool {
	lane, ok := w.lanes[d.m.Queue]
	if !ok {
		return !d.claimed
	}
	if d.m.Group != AnyGroup && !w.cfg.Owns(d.m.Group) {
		return !d.claimed
	}
	k := msgKey{d.m.Queue, d.m.ID}
	w.mu.Lock()
	if f, ok := w.pending[k]; ok {
		if d.claimed && !f.claimed {
			// The sweep claimed a message whose notification is in a
			// lane (it read the pending set before the notification
			// came): that copy goes on under this claim.
			f.claimed, f.m = true, d.m
		}
		w.mu.Unlock()
		return true
	}
	w.pending[k] = &flight{claimed: d.claimed, m: d.m}
	w.mu.Unlock()
	select {
	case lane <- d:
		return true
	default:
		// The lane is full: the sweeper will offer the message again.
		w.done(k)
		return !d.claimed
	}
}

// done forgets a pending message.
func (w *Worker) done(k msgKey) {
	w.mu.Lock()
	delete(w.pending, k)
	w.mu.Unlock()
}

// pendingIDs lists the ids of the messages pending here, for the sweep.
func (w *Worker) pendingIDs() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, 0, len(w.pending))
	for k := range w.pending {
		ids = append(ids, k.id)
	}
	return ids
}

// claimedBySweep reports whether the sweep has claimed the pending
// message k, with the claimed message.
func (w *Worker) claimedBySweep(k msgKey) (Message, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.pending[k]; ok && f.claimed {
		return f.m, true
	}
	return Message{}, false
}

// claimedMeanwhile reports whether the sweep claimed the pending message
// k while its unclaimed copy was on its way, with the claimed message; if
// not, the message is forgotten (the caller drops its copy).
func (w *Worker) claimedMeanwhile(k msgKey) (Message, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.pending[k]; ok && f.claimed {
		return f.m, true
	}
	delete(w.pending, k)
	return Message{}, false
}

func (w *Worker) work(ctx context.Context, h Handler, lane <-chan delivery) {
	defer w.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-lane:
			w.process(ctx, h, d)
		}
	}
}

func (w *Worker) process(ctx context.Context, h Handler, d delivery) {
	m := d.m
	k := msgKey{m.Queue, m.ID}
	if !d.claimed {
		if claimed, ok := w.claimedBySweep(k); ok {
			m, d.claimed = claimed, true
		}
	}
	if !d.claimed && m.Note != nil {
		if noted := w.cfg.Noted[m.Queue]; noted != nil {
			if nm, ok := noted(m); ok {
				m, d.claimed = nm, true // handled unclaimed: the handler's write deletes it
			}
		}
	}
	if !d.claimed {
		claimed, ok, err := w.cfg.Store.ClaimWith(ctx, m.Queue, m.ID, w.cfg.Node, w.cfg.ClaimTTL, w.cfg.ClaimReads[m.Queue])
		if err != nil {
			w.done(k)
			if ctx.Err() == nil {
				w.cfg.Logger.Warn("claim queue message", "queue", m.Queue.String(), "message_id", m.ID, "error", err.Error())
			}
			return
		}
		if !ok {
			// Processed already, or another worker holds it, or the
			// sweep here claimed it a moment ago.
			if m, ok = w.claimedMeanwhile(k); !ok {
				return
			}
		} else {
			m = claimed
		}
	}
	handedOff := false
	defer func() {
		if !handedOff {
			w.done(k)
		}
	}()
	// Each message is a span, the child of the one that enqueued it: a
	// run's start continues the API request's trace, and what its handler
	// enqueues continues the run's.
	ctx, span := tracing.Tracer().Start(tracing.WithTraceparent(ctx, m.TraceContext), "queue "+m.Queue.String(),
		trace.WithSpanKind(trace.SpanKindConsumer))
	defer span.End()
	err := w.run(ctx, h, m)
	if errors.Is(err, ErrHandedOff) {
		handedOff = true // pending until Settled
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		if ctx.Err() != nil {
			return // shutting down; the claim expires and another node retries
		}
		w.cfg.Logger.Warn("queue message failed; will retry", "queue", m.Queue.String(), "message_id", m.ID, "error", err.Error())
		if err := w.cfg.Store.Defer(ctx, m, w.cfg.RetryDelay); err != nil {
			w.cfg.Logger.Warn("defer queue message", "error", err.Error())
		}
		return
	}
	if err := w.cfg.Store.Delete(ctx, m); err != nil && ctx.Err() == nil {
		w.cfg.Logger.Warn("delete queue message", "queue", m.Queue.String(), "message_id", m.ID, "error", err.Error())
	}
}

// Settled ends a message handed off (ErrHandedOff) once its write has
// settled: with err nil the write deleted it; otherwise it is Failed. Either way it is no longer pending
// here, and a sweep may offer it again.
func (w *Worker) Settled(ctx context.Context, m Message, err error) {
	if err != nil {
		w.Failed(ctx, m, err)
	}
	w.done(msgKey{m.Queue, m.ID})
}

// Failed is what the worker does with a message whose handler failed:
// it is logged and offered again after the retry delay.
func (w *Worker) Failed(ctx context.Context, m Message, err error) {
	w.cfg.Logger.Warn("queue message failed; will retry", "queue", m.Queue.String(), "message_id", m.ID, "error", err.Error())
	if err := w.cfg.Store.Defer(ctx, m, w.cfg.RetryDelay); err != nil && ctx.Err() == nil {
		w.cfg.Logger.Warn("defer queue message", "error", err.Error())
	}
}

// run calls h, turning a panic into an error so one bad message cannot take
// the process down.
func (w *Worker) run(ctx context.Context, h Handler, m Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("handler panic: %v", v)
		}
	}()
	return h(ctx, m)
}

func (w *Worker) listen(ctx context.Context) {
	defer w.wg.Done()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := w.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		w.cfg.Logger.Warn("queue listener lost its connection; reconnecting", "error", fmt.Sprint(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (w *Worker) listenOnce(ctx context.Context) error {
	conn, err := w.cfg.Listen(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	for ch := range w.cfg.Notifications {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	if w.cfg.OnListen != nil {
		w.cfg.OnListen(true)
		defer w.cfg.OnListen(false)
	}
	// Anything sent while we were not listening is found by a sweep.
	w.sweepOnce(ctx, 0)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel != Channel {
			if f := w.cfg.Notifications[n.Channel]; f != nil {
				f(n.Payload)
			}
			continue
		}
		msgs, err := ParseNotifications(n.Payload)
		if err != nil {
			w.cfg.Logger.Warn("ignore queue notification", "error", err.Error())
			continue
		}
		for _, m := range msgs {
			w.deliver(delivery{m: m})
		}
	}
}

func (w *Worker) sweep(ctx context.Context) {
	defer w.wg.Done()
	t := time.NewTicker(w.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.sweepOnce(ctx, w.cfg.SweepInterval)
		}
	}
}

// sweepOnce claims and offers due messages; one never claimed must be
// grace old.
func (w *Worker) sweepOnce(ctx context.Context, grace time.Duration) {
	groups := w.cfg.Groups()
	queues := make([]ID, 0, len(w.lanes))
	for q := range w.lanes {
		queues = append(queues, q)
	}
	msgs, err := w.cfg.Store.ClaimDueExcept(ctx, queues, groups, w.pendingIDs(), w.cfg.Node, w.cfg.ClaimTTL, grace, 256)
	if err != nil {
		if ctx.Err() == nil {
			w.cfg.Logger.Warn("sweep queue", "error", err.Error())
		}
		return
	}
	for _, m := range msgs {
		if !w.deliver(delivery{m: m, claimed: true}) {
			_ = w.cfg.Store.Release(ctx, m)
		}
	}
}
