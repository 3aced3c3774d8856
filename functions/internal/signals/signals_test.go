package signals_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
	"github.com/maestro-aws/maestro/engine/trigger/signalmsg"
	"github.com/maestro-aws/maestro/functions/internal/signals"
)

// rules route the landing bucket's sales objects to one signal per table.
const rules = `[{"bucket": "landing", "prefix": "sales/", "key_pattern": "sales/{table}/{file}", "signal": "landed/{table}"}]`

type env struct {
	*flowtest.Env
	h       *signals.Handler
	metrics *bytes.Buffer
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ft := flowtest.New(t)
	rs, err := signalmsg.ParseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	buf := &bytes.Buffer{}
	h, err := signals.New(signals.Config{Broker: signalbroker.New(ft.Pool, ft.Runs, flowtest.Logger()), Rules: rs,
		Metrics: metrics.New(&lockedWriter{w: buf}, metrics.ServiceSignals), Logger: flowtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	return &env{Env: ft, h: h, metrics: buf}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (e *env) count(sql string) int {
	e.T.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		e.T.Fatal(err)
	}
	return n
}

// batch is an SQS event of bodies, with message ids m0, m1, ...
func batch(bodies ...string) events.SQSEvent {
	var ev events.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i), Body: b, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:eu-west-1:111122223333:MaestroSignals-SignalsQueue",
			Attributes:     map[string]string{"ApproximateReceiveCount": "1"}})
	}
	return ev
}

// s3Event is an S3 event notification of a new object, as S3 writes it
// (the key URL-encoded).
func s3Event(key, sequencer string) string {
	return `{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"eu-west-1","eventTime":"2026-05-01T03:10:00.000Z",
"eventName":"ObjectCreated:Put","userIdentity":{"principalId":"AWS:AIDAEXAMPLE"},"requestParameters":{"sourceIPAddress":"10.0.0.1"},
"responseElements":{"x-amz-request-id":"C3D13FE58DE4C810","x-amz-id-2":"FMyUVURIY8"},"s3":{"s3SchemaVersion":"1.0",
"configurationId":"signals","bucket":{"name":"landing","ownerIdentity":{"principalId":"A3NL1KOZZKExample"},"arn":"arn:aws:s3:::landing"},
"object":{"key":"` + key + `","size":2048,"eTag":"9b2cf535f27731c974343645a3985328","sequencer":"` + sequencer + `"}}}]}`
}

// snsOf wraps a message as SNS delivers it to an SQS subscription.
func snsOf(msg string) string {
	b, _ := json.Marshal(map[string]string{"Type": "Notification", "MessageId": "da41e39f-ea4d-435a-b922-c6aae3915ebe",
		"TopicArn": "arn:aws:sns:eu-west-1:111122223333:landing-events", "Message": msg, "Timestamp": "2026-05-01T03:10:01.000Z",
		"SignatureVersion": "1", "Signature": "EXAMPLE", "SigningCertURL": "https://sns.example/cert.pem",
		"UnsubscribeURL": "https://sns.example/unsubscribe"})
	return string(b)
}

// eventBridgeOf is the EventBridge event of the same object (the key as
// is).
func eventBridgeOf(key, sequencer string) string {
	return `{"version":"0","id":"17793124-05d4-b198-2fde-7ededc63b103","detail-type":"Object Created","source":"aws.s3",
"account":"111122223333","time":"2026-05-01T03:10:00Z","region":"eu-west-1","resources":["arn:aws:s3:::landing"],
"detail":{"version":"0","bucket":{"name":"landing"},"object":{"key":"` + key + `","size":2048,"etag":"9b2cf535f27731c974343645a3985328",
"sequencer":"` + sequencer + `"},"request-id":"N4N7GDK58NMKJ12R","requester":"111122223333","reason":"PutObject"}}`
}

// A batch mixing every shape: each message's signals are stored and
// matched in one transaction; poison messages (not JSON, an unknown shape,
// an invalid signal) are reported as batch item failures without
// blocking the others; a test event and an object no rule takes succeed
// with nothing announced. Metrics count the messages and the runs and
// wake-ups.
func TestHandlerReadsEveryShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "on-orders",
		"signal_triggers": [{"definitions": {"landed/orders": {}}}],
		"steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "on-table",
		"signal_triggers": [{"definitions": {"warehouse.sales": {"match_params": {"dt": {"value": "2026-05-01", "operator": "="}}}}}],
		"steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`)
	res, err := e.h.Handle(context.Background(), batch(
		s3Event("sales/orders/part+0001.parquet", "0055AED6DCD90281E5"), // m0: starts on-orders
		snsOf(s3Event("sales/orders/part+0002.parquet", "0055AED6DCD90281E6")),
		eventBridgeOf("sales/orders/part 0003.parquet", "0055AED6DCD90281E7"),
		`{"table_update": {"table": "warehouse.sales", "snapshot_id": 42, "partition": {"dt": "2026-05-01"}}}`, // m3
		`{"name": "plain", "params": {"n": 1}}`,
		`not json`,                             // m5: poison
		`{"hello": "world"}`,                   // m6: poison
		`{"name": "bad", "params": {"x": {}}}`, // m7: invalid signal
		`{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"landing"}`,
		s3Event("other/x.csv", "0055AED6DCD90281E8"), // m9: no rule
	))
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range res.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if strings.Join(failed, ",") != "m5,m6,m7" {
		t.Fatalf("batch item failures %v, want m5, m6 and m7", failed)
	}
	if n := e.count(`SELECT count(*) FROM signal_instance`); n != 5 {
		t.Errorf("%d signal instances, want 5", n)
	}
	if n := e.count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'on-orders'`); n != 3 {
		t.Errorf("%d on-orders runs, want 3", n)
	}
	if n := e.count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'on-table'`); n != 1 {
		t.Errorf("%d on-table runs, want 1", n)
	}
	var key string
	if err := e.Pool.QueryRow(context.Background(), `SELECT params->>'key' FROM signal_instance
		WHERE name = 'landed/orders' ORDER BY seq LIMIT 1`).Scan(&key); err != nil || key != "sales/orders/part 0001.parquet" {
		t.Errorf("decoded key %q (%v)", key, err)
	}
	var m map[string]any
	if err := json.Unmarshal(e.metrics.Bytes(), &m); err != nil {
		t.Fatalf("metrics %q: %v", e.metrics.String(), err)
	}
	if m["SignalsReceived"] != 10.0 || m["SignalsMatched"] != 4.0 || m["Service"] != "signals" {
		t.Errorf("metrics %v", m)
	}

	// The whole batch again (SQS redelivers): nothing new, and no
	// failures, as an empty list (not null) in the response's JSON.
	e.metrics.Reset()
	res, err = e.h.Handle(context.Background(), batch(s3Event("sales/orders/part+0001.parquet", "0055AED6DCD90281E5"),
		eventBridgeOf("sales/orders/part 0001.parquet", "0055AED6DCD90281E5")))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res); string(b) != `{"batchItemFailures":[]}` {
		t.Errorf("response %s, want an empty batchItemFailures list", b)
	}
	if n := e.count(`SELECT count(*) FROM workflow_instance`); n != 4 {
		t.Errorf("%d runs after redelivery, want 4", n)
	}
}

// A database that cannot store the batch fails every message that has a
// signal (SQS offers them again) and none of the others.
func TestHandlerDatabaseDownFailsTheBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Pool.Close()
	res, err := e.h.Handle(context.Background(), batch(`{"name": "a"}`, `{"Service":"Amazon S3","Event":"s3:TestEvent"}`, `{"name": "b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.BatchItemFailures) != 2 || res.BatchItemFailures[0].ItemIdentifier != "m0" || res.BatchItemFailures[1].ItemIdentifier != "m2" {
		t.Fatalf("failures %+v", res.BatchItemFailures)
	}
}

// SQS delivers at least once: 10,000 messages in which each of 1,000
// distinct signals (pairs joined on a key, S3 objects in three envelopes,
// table updates) comes 10 times, shuffled, handled by four concurrent
// handler instances in batches of 10, store exactly one signal instance
// per distinct signal and start exactly one run per satisfying set.
func TestTenThousandMessagesExactlyOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("10,000 messages")
	}
	e := newEnv(t)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "pairs",
		"signal_triggers": [{"definitions": {"orders": {"join_keys": ["merchant"]}, "payments": {"join_keys": ["payee"]}}}],
		"steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "objects",
		"signal_triggers": [{"definitions": {"landed/events": {}}}], "steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "tables",
		"signal_triggers": [{"definitions": {"warehouse.t": {}}}], "steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`)
	const sets = 250
	var distinct []func(copy int) string
	for i := range sets {
		distinct = append(distinct,
			func(int) string {
				return fmt.Sprintf(`{"name":"orders","params":{"merchant":"m%d","total":%d}}`, i, i*10)
			},
			func(int) string {
				return fmt.Sprintf(`{"name":"payments","params":{"payee":"m%d"},"request_id":"pay-%d"}`, i, i)
			},
			func(copy int) string {
				key, seq := fmt.Sprintf("sales/events/part-%04d.json", i), fmt.Sprintf("%018X", 1000+i)
				switch copy % 3 {
				case 0:
					return s3Event(key, seq)
				case 1:
					return snsOf(s3Event(key, seq))
				}
				return eventBridgeOf(key, seq)
			},
			func(int) string {
				return fmt.Sprintf(`{"table_update":{"table":"warehouse.t","snapshot_id":%d,"partition":{"dt":"2026-05-%02d"}}}`, i, i%28+1)
			})
	}
	var bodies []string
	for _, d := range distinct {
		for c := range 10 {
			bodies = append(bodies, d(c))
		}
	}
	rand.Shuffle(len(bodies), func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i] })
	if len(bodies) != 10_000 {
		t.Fatalf("%d messages", len(bodies))
	}
	work := make(chan []string)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for b := range work {
				res, err := e.h.Handle(context.Background(), batch(b...))
				if err == nil && len(res.BatchItemFailures) > 0 {
					err = fmt.Errorf("%d batch item failures", len(res.BatchItemFailures))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := 0; i < len(bodies); i += 10 {
		work <- bodies[i : i+10]
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := e.count(`SELECT count(*) FROM signal_instance`); n != 4*sets {
		t.Errorf("%d signal instances, want %d", n, 4*sets)
	}
	for wf, want := range map[string]int{"pairs": sets, "objects": sets, "tables": sets} {
		if n := e.count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = '` + wf + `'`); n != want {
			t.Errorf("%s: %d runs, want %d", wf, n, want)
		}
	}
	// Every set is a different one: no signal started two runs.
	if n := e.count(`SELECT count(*) FROM (SELECT seq FROM signal_lineage WHERE kind = 'STARTED' GROUP BY seq HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d signals started more than one run", n)
	}
	if n := e.count(`SELECT count(DISTINCT initiator->'signal_id_map') FROM workflow_instance WHERE workflow_id = 'pairs'`); n != sets {
		t.Errorf("%d distinct sets started pairs runs, want %d", n, sets)
	}
	if n := e.count(`SELECT count(*) FROM signal_trigger_pending`); n != 0 {
		t.Errorf("%d signals still held", n)
	}
}
