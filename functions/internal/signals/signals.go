// Package signals is the signals Lambda's handler: it reads a batch of
// messages from the signals queue (Maestro signal JSON, S3 event
// notifications, table updates, and these in SNS or EventBridge envelopes:
// engine/trigger/signalmsg), announces all their signals in one transaction
// (engine/trigger/signalbroker: deduplicated, waking waiting steps, starting the
// runs of signal triggers they satisfy) and reports the messages that
// failed as batch item failures. A message that cannot be read, or holds
// an invalid signal, fails alone and reaches the dead-letter queue after
// the queue's receive count; a database failure fails the messages whose
// signals it could not store, which SQS offers again (their signals are
// then duplicates of nothing, or of what did commit: exactly once).
package signals

import (
	"context"
	"errors"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
	"github.com/maestro-aws/maestro/engine/trigger/signalmsg"
)

// Handler handles batches of signal messages.
type Handler struct {
	broker  *signalbroker.Broker
	parser  *signalmsg.Parser
	metrics *metrics.Emitter
	log     *slog.Logger
}

// Config configures a Handler.
type Config struct {
	Broker *signalbroker.Broker
	// Rules map S3 object events to signals (MAESTRO_S3_SIGNAL_RULES).
	Rules signalmsg.Rules
	// Tables reads the snapshot of Glue Data Catalog and S3 Tables table
	// changes (engine/iceberg); nil leaves those events unreadable.
	Tables signalmsg.TableResolver
	// Metrics receives SignalsReceived and SignalsMatched once per batch;
	// nil emits nothing.
	Metrics *metrics.Emitter
	Logger  *slog.Logger
}

// New builds a handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Broker == nil || cfg.Logger == nil {
		return nil, errors.New("signals: Config.Broker and Config.Logger are required")
	}
	return &Handler{broker: cfg.Broker, parser: &signalmsg.Parser{Rules: cfg.Rules, Logger: cfg.Logger, Tables: cfg.Tables},
		metrics: cfg.Metrics, log: cfg.Logger}, nil
}

// Handle announces the signals of a batch of SQS messages and reports the
// messages that failed.
func (h *Handler) Handle(ctx context.Context, in events.SQSEvent) (events.SQSEventResponse, error) {
	var (
		// An empty list, never null: AWS takes both as "no failures",
		// but an event source that reads the list (ministack's) fails
		// the whole batch on null and deletes nothing.
		out  = events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		reqs []signal.Request
		from []int // message index of each request
	)
	failed := map[int]bool{}
	fail := func(i int) {
		if !failed[i] {
			failed[i] = true
			out.BatchItemFailures = append(out.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: in.Records[i].MessageId})
		}
	}
	for i, m := range in.Records {
		rs, err := h.parser.ParseContext(ctx, []byte(m.Body))
		if err == nil {
			err = check(rs)
		}
		if err != nil {
			h.log.Error("unusable signal message; it goes to the dead-letter queue after its retries",
				"message_id", m.MessageId, "receive_count", m.Attributes["ApproximateReceiveCount"], "error", err.Error())
			fail(i)
			continue
		}
		for range rs {
			from = append(from, i)
		}
		reqs = append(reqs, rs...)
	}
	var stats signalbroker.Stats
	if len(reqs) > 0 {
		res, s, err := h.broker.Announce(ctx, reqs)
		if err != nil {
			h.log.Warn("storing the batch's signals failed; its messages will be offered again",
				"messages", len(in.Records), "signals", len(reqs), "error", err.Error())
			for _, i := range from {
				fail(i)
			}
			h.emit(len(in.Records), signalbroker.Stats{})
			return out, nil
		}
		stats = s
		for k, r := range res {
			if r.Err != nil {
				fail(from[k])
			}
		}
	}
	h.log.Info("signal batch", "messages", len(in.Records), "signals", len(reqs), "stored", stats.Stored,
		"woken", stats.Woken, "matched", stats.Matched, "started", stats.Started, "failed", len(out.BatchItemFailures))
	h.emit(len(in.Records), stats)
	return out, nil
}

// check checks a message's signals, so that a message with an invalid one
// announces none of them.
func check(rs []signal.Request) error {
	for i := range rs {
		if err := rs[i].Check(); err != nil {
			return err
		}
	}
	return nil
}

// emit writes the batch's metrics: messages read, and steps woken plus
// runs started.
func (h *Handler) emit(messages int, s signalbroker.Stats) {
	if err := h.metrics.Emit(metrics.Count(metrics.SignalsReceived, float64(messages)),
		metrics.Count(metrics.SignalsMatched, float64(s.Woken+s.Started))); err != nil {
		h.log.Warn("write metrics", "error", err.Error())
	}
}
