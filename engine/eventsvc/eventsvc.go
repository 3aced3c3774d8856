// Package eventsvc starts a process's event services from its environment:
// the forwarders that move events from the outbox to the configured sinks,
// the cleaner of old events, and the alerting service. cmd/maestro calls
// it for `maestro engine` and `maestro dev`. See docs/events.md.
//
// Environment:
//   - MAESTRO_EVENT_QUEUE_URL: forward to this SQS queue (the publisher
//     Lambda's source); unset, nothing goes to AWS.
//   - MAESTRO_EVENT_WEBHOOK_URL: POST every event to this URL.
//   - MAESTRO_EVENT_RETENTION: how long events stay readable (default 1h;
//     24h in maestro dev).
//   - MAESTRO_CLUSTER_NAME: the events' cluster_name (default "maestro").
//   - MAESTRO_PUBLIC_URL: the base of the run links in alerts (maestro dev:
//     its own address).
package eventsvc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/alert"
	"github.com/maestro-aws/maestro/engine/awsconf"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/event/sqssink"
)

// Options are what the environment does not say.
type Options struct {
	Logger *slog.Logger
	// Getenv reads the environment (os.Getenv).
	Getenv func(string) string
	// Local adds the in-process hub, which the live feed streams from
	// (maestro dev).
	Local bool
	// LinkBase is the alert links' base when MAESTRO_PUBLIC_URL is unset.
	LinkBase string
	// Retention is the default of MAESTRO_EVENT_RETENTION (default 1h).
	Retention time.Duration
	// PollInterval, when set, is how often forwarders and the alerting
	// service look for new events (tests shorten it).
	PollInterval time.Duration
}

// Services are the running event services of a process.
type Services struct {
	// Hub feeds the live stream; nil unless Options.Local.
	Hub *event.Hub
	// Feed serves the retained events (and the live stream with a hub).
	Feed *event.Feed

	forwarders []*event.Forwarder
	cleaner    *event.Cleaner
	alerts     *alert.Service
}

// Start builds and starts the services over db.
func Start(ctx context.Context, db *pgxpool.Pool, o Options) (*Services, error) {
	env := o.Getenv
	cluster := env("MAESTRO_CLUSTER_NAME")
	retention := o.Retention
	if v := env("MAESTRO_EVENT_RETENTION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("MAESTRO_EVENT_RETENTION=%q is not a positive duration", v)
		}
		retention = d
	}
	s := &Services{}
	sinks := map[string]event.Sink{}
	if o.Local {
		s.Hub = event.NewHub(cluster)
		sinks["local"] = s.Hub
	}
	s.Feed = event.NewFeed(db, s.Hub, cluster)
	if u := env("MAESTRO_EVENT_WEBHOOK_URL"); u != "" {
		sinks["webhook"] = event.NewWebhook(u, cluster, nil)
	}
	if q := env("MAESTRO_EVENT_QUEUE_URL"); q != "" {
		awsCfg, err := awsconf.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("aws config for the event queue: %w", err)
		}
		sink, err := sqssink.New(sqssink.Config{Client: sqs.NewFromConfig(awsCfg), QueueURL: q, Logger: o.Logger})
		if err != nil {
			return nil, err
		}
		sinks["sqs"] = sink
	}
	for _, name := range []string{"local", "webhook", "sqs"} {
		sink, ok := sinks[name]
		if !ok {
			continue
		}
		// The live hub is this process's own: every maestro dev on the
		// database streams every event.
		f, err := event.NewForwarder(db, event.ForwarderConfig{Name: name, Sink: sink, Logger: o.Logger, PollInterval: o.PollInterval,
			Private: name == "local"})
		if err != nil {
			return nil, err
		}
		s.forwarders = append(s.forwarders, f)
	}
	var err error
	if s.cleaner, err = event.NewCleaner(db, event.CleanerConfig{Retention: retention, Logger: o.Logger}); err != nil {
		return nil, err
	}
	link := env("MAESTRO_PUBLIC_URL")
	if link == "" {
		link = o.LinkBase
	}
	if s.alerts, err = alert.New(db, alert.Config{Logger: o.Logger, LinkBase: link, PollInterval: o.PollInterval}); err != nil {
		return nil, err
	}
	for _, f := range s.forwarders {
		if err := f.Start(ctx); err != nil {
			s.Stop()
			return nil, err
		}
	}
	if err := s.cleaner.Start(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.alerts.Start(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	names := make([]string, 0, len(s.forwarders))
	for name := range sinks {
		names = append(names, name)
	}
	o.Logger.Info("event services started", "sinks", names, "retention", retention.String())
	return s, nil
}

// Wake makes the forwarders read the outbox now: the engine calls it after
// writes that recorded events (flow.Config.EventsWritten).
func (s *Services) Wake() {
	if s == nil {
		return
	}
	for _, f := range s.forwarders {
		f.Wake()
	}
}

// Stop stops every service. Idempotent.
func (s *Services) Stop() {
	if s == nil {
		return
	}
	if s.alerts != nil {
		s.alerts.Stop()
	}
	if s.cleaner != nil {
		s.cleaner.Stop()
	}
	for _, f := range s.forwarders {
		f.Stop()
	}
}
