// Package metrics writes CloudWatch metrics in the embedded metric format
// (EMF): one JSON object per line on a process's log stream, which
// CloudWatch Logs turns into metrics without any API call. The engine task's
// awslogs driver and every Lambda's log group carry them, so neither needs
// cloudwatch:PutMetricData.
//
// Every metric is in the deployment's namespace (Namespace, or
// Maestro/<stage> for a staged deployment: NamespaceOf) with the one
// dimension Service (the process
// kind: engine, api, timetrigger, signals, publisher); the metric names are
// constants here so that the CDK app's alarms and dashboard name exactly what
// the code emits. A Lambda emits once per invocation with Emitter.Emit; the
// engine aggregates with a Recorder and flushes once a period.
//
// No Go EMF library is maintained (AWS ships them for Node.js, Python, Java
// and .NET only), and the format is a small JSON document, so it is written
// here with encoding/json.
package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"
)

// Namespace is the CloudWatch namespace of a deployment's Maestro metrics
// when it has no stage.
const Namespace = "Maestro"

// NamespaceEnv names the environment variable that sets a process's
// namespace; the CDK app sets it to NamespaceOf(stage) for the engine and
// every function, and the alarms read the same namespace. Unset, Namespace.
const NamespaceEnv = "MAESTRO_METRICS_NAMESPACE"

// NamespaceOf is the namespace of a deployment's metrics: Namespace, or
// Maestro/<stage>, so that two stages in one account and region never read
// each other's metrics.
func NamespaceOf(stage string) string {
	if stage == "" {
		return Namespace
	}
	return Namespace + "/" + stage
}

// DimensionService is the one dimension every metric carries.
const DimensionService = "Service"

// Service names: the value of DimensionService for each process kind.
const (
	ServiceEngine      = "engine"
	ServiceAPI         = "api"
	ServiceTimeTrigger = "timetrigger"
	ServiceSignals     = "signals"
	ServicePublisher   = "publisher"
	ServiceArchiver    = "archiver"
)

// Metric names. The CDK app builds alarms, autoscaling and the dashboard on
// these names; a metric a function starts emitting is added here first.
const (
	// StepsEnded counts step attempts that reached a terminal status
	// (engine); the dashboard shows it per second.
	StepsEnded = "StepsEnded"
	// StepLaunchLatency is the time from a step attempt's creation to
	// RUNNING, less the time it waited for signals, tag permits or at a
	// breakpoint (engine, milliseconds).
	StepLaunchLatency = "StepLaunchLatency"
	// QueueDepth is the number of outbox messages (engine, sampled).
	QueueDepth = "QueueDepth"
	// QueueAge is the age of the oldest outbox message that is due and not
	// being handled (engine, seconds, sampled). The engine service scales
	// out on it.
	QueueAge = "QueueAge"
	// GroupTakeovers counts flow groups this node claimed that another node
	// had held before, released at its shutdown or left to expire (engine).
	GroupTakeovers = "GroupTakeovers"
	// OwnedGroups is the number of flow groups this node holds (engine).
	OwnedGroups = "OwnedGroups"
	// UnownedGroups is the number of flow groups no live node holds, as
	// seen by this node (engine). Above zero for minutes means runs in those
	// groups make no progress: the engine health alarm.
	UnownedGroups = "UnownedGroups"
	// Ready is 1 while an engine node is ready (its health check passes:
	// database answering, lease rounds succeeding, groups held when some
	// are free) and 0 when it is not (engine, sampled). The container's
	// liveness check does not ask the database, so this metric and its
	// alarm report readiness instead.
	Ready = "Ready"
	// APIRequests counts REST requests (api).
	APIRequests = "Requests"
	// APIServerErrors counts REST responses with a 5xx status (api).
	APIServerErrors = "ServerErrors"
	// APILatency is a REST request's handling time (api, milliseconds).
	APILatency = "Latency"
	// TriggerLag is how late the time-trigger function fired a due trigger
	// (timetrigger, seconds). Alarmed above 60 s.
	TriggerLag = "TriggerLag"
	// SignalsReceived counts signal messages the signals function read
	// (signals).
	SignalsReceived = "SignalsReceived"
	// SignalsMatched counts workflow starts and step wake-ups the signals
	// function made from them (signals).
	SignalsMatched = "SignalsMatched"
	// PublishFailures counts events the publisher failed to publish
	// (publisher).
	PublishFailures = "PublishFailures"
	// RunsArchived counts runs the archiver wrote to the archive and
	// deleted from the database (archiver).
	RunsArchived = "RunsArchived"
	// StepsArchived counts their step attempts (archiver).
	StepsArchived = "StepsArchived"
	// ArchiveLag is how long past its retention the oldest archivable run
	// still in the database ended, after a pass (archiver, seconds).
	// Alarmed above a day: the archiver is failing or cannot keep up.
	ArchiveLag = "ArchiveLag"
	// ArchiveFailures counts passes that failed (archiver). Alarmed.
	ArchiveFailures = "ArchiveFailures"
)

// catalog lists, by service, the metrics that service emits.
var catalog = map[string][]string{
	ServiceEngine:      {StepsEnded, StepLaunchLatency, QueueDepth, QueueAge, GroupTakeovers, OwnedGroups, UnownedGroups, Ready},
	ServiceAPI:         {APIRequests, APIServerErrors, APILatency},
	ServiceTimeTrigger: {TriggerLag},
	ServiceSignals:     {SignalsReceived, SignalsMatched},
	ServicePublisher:   {PublishFailures},
	ServiceArchiver:    {RunsArchived, StepsArchived, ArchiveLag, ArchiveFailures},
}

// Catalog returns, by service (the DimensionService value), the names of
// the metrics that service emits. It is the contract between the code that
// writes metrics and the CDK app's alarms, autoscaling and dashboard: an
// Emitter refuses a metric its service does not list, and the infra tests
// check that every Maestro metric the app reads is listed for the service
// its dimension names. A metric a process starts emitting is added here.
func Catalog() map[string][]string {
	out := make(map[string][]string, len(catalog))
	for service, names := range catalog {
		out[service] = slices.Clone(names)
	}
	return out
}

// Emits reports whether service emits the metric name (Catalog).
func Emits(service, name string) bool {
	return slices.Contains(catalog[service], name)
}

// Unit is a CloudWatch unit.
type Unit string

// The units Maestro's metrics use.
const (
	UnitCount        Unit = "Count"
	UnitSeconds      Unit = "Seconds"
	UnitMilliseconds Unit = "Milliseconds"
)

// Value is one metric observation, or several of one metric (Values with
// Counts, EMF's compact form of a distribution).
type Value struct {
	Name string
	Unit Unit
	// Values are the observed values; Counts, when set, says how many times
	// each was observed (same length as Values).
	Values []float64
	Counts []float64
}

// Count is a count observation.
func Count(name string, n float64) Value {
	return Value{Name: name, Unit: UnitCount, Values: []float64{n}}
}

// Seconds is a duration observation in seconds.
func Seconds(name string, d time.Duration) Value {
	return Value{Name: name, Unit: UnitSeconds, Values: []float64{d.Seconds()}}
}

// Milliseconds is a duration observation in milliseconds.
func Milliseconds(name string, d time.Duration) Value {
	return Value{Name: name, Unit: UnitMilliseconds, Values: []float64{float64(d) / float64(time.Millisecond)}}
}

// Emitter writes EMF lines for one service. It is safe for concurrent use;
// each Emit is one Write of one line.
type Emitter struct {
	namespace string
	service   string
	now       func() time.Time

	mu sync.Mutex
	w  io.Writer
}

// New returns an Emitter writing to w (a Lambda's or the engine's stdout)
// with DimensionService set to service.
//
// Its namespace is the process's: MAESTRO_METRICS_NAMESPACE, else Namespace.
func New(w io.Writer, service string) *Emitter {
	ns := os.Getenv(NamespaceEnv)
	if ns == "" {
		ns = Namespace
	}
	return &Emitter{w: w, namespace: ns, service: service, now: time.Now}
}

// Service is the emitter's DimensionService value.
func (e *Emitter) Service() string { return e.service }

// Emit writes the values as one EMF document. Values without an
// observation are left out; nothing is written when none is left. A metric
// the emitter's service does not emit (Catalog) is an error, and then
// nothing is written. A nil Emitter discards everything, so callers need not
// check.
func (e *Emitter) Emit(values ...Value) error {
	if e == nil {
		return nil
	}
	line, err := e.encode(values)
	if err != nil || line == nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.w.Write(line); err != nil {
		return fmt.Errorf("write metrics: %w", err)
	}
	return nil
}

type metricDef struct {
	Name string `json:"Name"`
	Unit Unit   `json:"Unit,omitempty"`
}

type directive struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []metricDef `json:"Metrics"`
}

type awsMeta struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// distribution is EMF's Values/Counts form of a metric value.
type distribution struct {
	Values []float64 `json:"Values"`
	Counts []float64 `json:"Counts,omitempty"`
}

// maxValues is EMF's limit of values per metric in one document.
const maxValues = 100

func (e *Emitter) encode(values []Value) ([]byte, error) {
	doc := map[string]any{DimensionService: e.service}
	dir := directive{Namespace: e.namespace, Dimensions: [][]string{{DimensionService}}}
	for _, v := range values {
		if len(v.Values) == 0 {
			continue
		}
		if !Emits(e.service, v.Name) {
			return nil, fmt.Errorf("metric %s: not a metric of service %q (metrics.Catalog)", v.Name, e.service)
		}
		if len(v.Counts) != 0 && len(v.Counts) != len(v.Values) {
			return nil, fmt.Errorf("metric %s: %d values but %d counts", v.Name, len(v.Values), len(v.Counts))
		}
		if _, dup := doc[v.Name]; dup || v.Name == "_aws" {
			return nil, fmt.Errorf("metric %s: name used twice in one document", v.Name)
		}
		if len(v.Values) > maxValues {
			return nil, fmt.Errorf("metric %s: %d values, EMF allows %d", v.Name, len(v.Values), maxValues)
		}
		dir.Metrics = append(dir.Metrics, metricDef{Name: v.Name, Unit: v.Unit})
		if len(v.Values) == 1 && len(v.Counts) == 0 {
			doc[v.Name] = v.Values[0]
		} else {
			doc[v.Name] = distribution{Values: v.Values, Counts: v.Counts}
		}
	}
	if len(dir.Metrics) == 0 {
		return nil, nil
	}
	doc["_aws"] = awsMeta{Timestamp: e.now().UnixMilli(), CloudWatchMetrics: []directive{dir}}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode metrics: %w", err)
	}
	return append(b, '\n'), nil
}
