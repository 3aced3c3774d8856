package signalmsg_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/trigger/signal"
	"github.com/maestro-aws/maestro/engine/trigger/signalmsg"
)

// rules routes the sales prefix of bucket raw-events (objects with a table
// in the key) and any .done marker of any bucket.
const rules = `[
  {"bucket": "raw-events", "prefix": "sales/", "key_pattern": "sales/{table}/dt={dt}/{file}", "signal": "s3/raw-events/{table}"},
  {"bucket": "*", "suffix": "_SUCCESS", "events": ["ObjectCreated:*", "ObjectRemoved:Delete"], "signal": "marker", "params": {"team": "data"}}
]`

func parser(t *testing.T) *signalmsg.Parser {
	t.Helper()
	rs, err := signalmsg.ParseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	return &signalmsg.Parser{Rules: rs}
}

// An S3 event notification as S3 sends it: the key URL-encoded (a space
// is '+', '=' is %3D).
const s3Notification = `{"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "eu-west-1",
  "eventTime": "2026-05-01T03:10:00.123Z", "eventName": "ObjectCreated:Put",
  "userIdentity": {"principalId": "AWS:AIDAEXAMPLE"}, "requestParameters": {"sourceIPAddress": "10.0.0.1"},
  "responseElements": {"x-amz-request-id": "C3D13FE58DE4C810", "x-amz-id-2": "FMyUVURIY8"},
  "s3": {"s3SchemaVersion": "1.0", "configurationId": "maestro-signals",
    "bucket": {"name": "raw-events", "ownerIdentity": {"principalId": "A3NL1KOZZKExample"}, "arn": "arn:aws:s3:::raw-events"},
    "object": {"key": "sales/orders/dt%3D2026-05-01/part+0001.parquet", "size": 1048576, "eTag": "d41d8cd98f00b204e9800998ecf8427e",
      "versionId": "096fKKXTRTtl3on89fVO.nfljtsv6qko", "sequencer": "0055AED6DCD90281E5"}}}]}`

// The same change as EventBridge delivers it: the key as is.
const s3EventBridge = `{"version": "0", "id": "17793124-05d4-b198-2fde-7ededc63b103", "detail-type": "Object Created",
  "source": "aws.s3", "account": "111122223333", "time": "2026-05-01T03:10:00Z", "region": "eu-west-1",
  "resources": ["arn:aws:s3:::raw-events"],
  "detail": {"version": "0", "bucket": {"name": "raw-events"},
    "object": {"key": "sales/orders/dt=2026-05-01/part 0001.parquet", "size": 1048576, "etag": "d41d8cd98f00b204e9800998ecf8427e",
      "version-id": "096fKKXTRTtl3on89fVO.nfljtsv6qko", "sequencer": "0055AED6DCD90281E5"},
    "request-id": "N4N7GDK58NMKJ12R", "requester": "123456789012", "source-ip-address": "1.2.3.4", "reason": "PutObject"}}`

// sns wraps a message in an SNS notification as SNS delivers it to SQS.
func sns(msg string) string {
	b, _ := json.Marshal(map[string]any{"Type": "Notification", "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
		"TopicArn": "arn:aws:sns:eu-west-1:111122223333:raw-events", "Subject": "Amazon S3 Notification", "Message": msg,
		"Timestamp": "2026-05-01T03:10:01.000Z", "SignatureVersion": "1", "Signature": "EXAMPLE",
		"SigningCertURL": "https://sns.eu-west-1.amazonaws.com/cert.pem", "UnsubscribeURL": "https://sns.example/unsubscribe"})
	return string(b)
}

func parse(t *testing.T, p *signalmsg.Parser, body string) []signal.Request {
	t.Helper()
	reqs, err := p.Parse([]byte(body))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	for i := range reqs {
		if err := reqs[i].Check(); err != nil {
			t.Fatalf("signal %d: %v", i, err)
		}
	}
	return reqs
}

// An S3 object event becomes the signal of the rule that takes it, with
// the decoded key, its pattern values and partitions as params, whether
// it comes directly, through SNS or from EventBridge; all three are the
// same signal (same request id), so a change delivered twice, in any
// envelope, is announced once.
func TestS3ObjectEvents(t *testing.T) {
	t.Parallel()
	p := parser(t)
	var ids []string
	for name, body := range map[string]string{"notification": s3Notification, "sns": sns(s3Notification), "eventbridge": s3EventBridge,
		"sns eventbridge": sns(s3EventBridge)} {
		reqs := parse(t, p, body)
		if len(reqs) != 1 {
			t.Fatalf("%s: %d signals", name, len(reqs))
		}
		r := reqs[0]
		if r.Name != "s3/raw-events/orders" || r.Params["key"] != "sales/orders/dt=2026-05-01/part 0001.parquet" ||
			r.Params["bucket"] != "raw-events" || r.Params["size"] != int64(1048576) || r.Params["dt"] != "2026-05-01" ||
			r.Params["table"] != "orders" || r.Params["file"] != "part 0001.parquet" ||
			r.Params["etag"] != "d41d8cd98f00b204e9800998ecf8427e" || r.Params["version_id"] != "096fKKXTRTtl3on89fVO.nfljtsv6qko" {
			t.Errorf("%s: %+v", name, r)
		}
		if r.Payload["event_name"] != "ObjectCreated:Put" || r.Payload["sequencer"] != "0055AED6DCD90281E5" ||
			r.RequestTime.Year() != 2026 {
			t.Errorf("%s: payload %v, time %v", name, r.Payload, r.RequestTime)
		}
		ids = append(ids, r.RequestID)
	}
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("request ids differ across envelopes: %v", ids)
		}
	}
	// Another change of the same object (a new sequencer) is a new signal.
	other := parse(t, p, strings.Replace(s3Notification, "0055AED6DCD90281E5", "0055AED6DCD90281F0", 1))
	if other[0].RequestID == ids[0] {
		t.Error("a new change of the object has the same request id")
	}
}

// Rules: events, wildcard buckets, constant params, several rules taking
// one object, and objects no rule takes (nothing announced, no error).
func TestRules(t *testing.T) {
	t.Parallel()
	p := parser(t)
	marker := strings.NewReplacer("sales/orders/dt%3D2026-05-01/part+0001.parquet", "sales/dt%3D2026-05-02/_SUCCESS").Replace(s3Notification)
	reqs := parse(t, p, marker)
	if len(reqs) != 1 || reqs[0].Name != "marker" || reqs[0].Params["team"] != "data" || reqs[0].Params["dt"] != "2026-05-02" {
		t.Fatalf("marker: %+v", reqs)
	}
	removed := strings.Replace(marker, "ObjectCreated:Put", "ObjectRemoved:Delete", 1)
	if reqs := parse(t, p, removed); len(reqs) != 1 || reqs[0].Payload["event_name"] != "ObjectRemoved:Delete" {
		t.Fatalf("removed marker: %+v", reqs)
	}
	// The sales rule does not take deletions, nor keys off its pattern.
	if reqs := parse(t, p, strings.Replace(s3Notification, "ObjectCreated:Put", "ObjectRemoved:Delete", 1)); len(reqs) != 0 {
		t.Errorf("deleted object: %+v", reqs)
	}
	if reqs := parse(t, p, strings.Replace(s3Notification, "sales/orders/dt%3D", "sales/orders/day%3D", 1)); len(reqs) != 0 {
		t.Errorf("off-pattern key: %+v", reqs)
	}
	if reqs := parse(t, p, strings.Replace(s3Notification, `"name": "raw-events"`, `"name": "other"`, 1)); len(reqs) != 0 {
		t.Errorf("other bucket: %+v", reqs)
	}
	// S3's test event when a notification is configured announces nothing.
	if reqs := parse(t, p, `{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-05-01T03:00:00.000Z","Bucket":"raw-events","RequestId":"X","HostId":"Y"}`); len(reqs) != 0 {
		t.Errorf("test event: %+v", reqs)
	}

	for name, bad := range map[string]string{
		"not json":             `[`,
		"not an array":         `{"bucket": "b", "signal": "s"}`,
		"no bucket":            `[{"signal": "s"}]`,
		"no signal":            `[{"bucket": "b"}]`,
		"unknown field":        `[{"bucket": "b", "signal": "s", "colour": "red"}]`,
		"repeated placeholder": `[{"bucket": "b", "signal": "s", "key_pattern": "{a}/{a}"}]`,
	} {
		if _, err := signalmsg.ParseRules(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A signal name placeholder without a value makes the message
	// unreadable (it would never announce).
	rs, _ := signalmsg.ParseRules(`[{"bucket": "*", "signal": "x/{nothing}"}]`)
	if _, err := (&signalmsg.Parser{Rules: rs}).Parse([]byte(s3Notification)); !errors.Is(err, signalmsg.ErrUnreadable) {
		t.Errorf("missing placeholder: %v", err)
	}
}

// Table updates, direct, through SNS and from EventBridge.
func TestTableUpdates(t *testing.T) {
	t.Parallel()
	p := parser(t)
	const update = `{"table": "warehouse.sales", "snapshot_id": 8744736658442914487, "partition": {"dt": "2026-05-01", "hour": 3},
		"watermark": 1777604400000, "operation": "append", "committed_at": "2026-05-01T03:10:00Z", "params": {"team": "data"}}`
	direct := parse(t, p, `{"table_update": `+update+`}`)[0]
	if direct.Name != "warehouse.sales" || direct.Params["snapshot_id"] != int64(8744736658442914487) ||
		direct.Params["dt"] != "2026-05-01" || direct.Params["hour"] != int64(3) || direct.Params["watermark"] != int64(1777604400000) ||
		direct.Params["operation"] != "append" || direct.Params["team"] != "data" || direct.Params["table"] != "warehouse.sales" ||
		!direct.RequestTime.Equal(time.Date(2026, 5, 1, 3, 10, 0, 0, time.UTC)) {
		t.Fatalf("table update: %+v", direct)
	}
	eb := parse(t, p, `{"version": "0", "id": "x", "detail-type": "Table Update", "source": "com.example.iceberg", "account": "1",
		"time": "2026-05-01T03:10:05Z", "region": "eu-west-1", "resources": [], "detail": `+update+`}`)[0]
	wrapped := parse(t, p, sns(`{"table_update": `+update+`}`))[0]
	if eb.RequestID != direct.RequestID || wrapped.RequestID != direct.RequestID {
		t.Errorf("request ids %s %s %s", direct.RequestID, eb.RequestID, wrapped.RequestID)
	}
	named := parse(t, p, `{"table_update": {"table": "t", "signal": "db/test/table1", "partition": {"vtts_utc_dateint": "20500101"}}}`)[0]
	if named.Name != "db/test/table1" || named.Params["vtts_utc_dateint"] != "20500101" {
		t.Errorf("named: %+v", named)
	}
	for name, bad := range map[string]string{
		"no table":          `{"table_update": {"snapshot_id": 1}}`,
		"unknown field":     `{"table_update": {"table": "t", "rows": 1}}`,
		"reserved name":     `{"table_update": {"table": "t", "partition": {"watermark": "x"}}}`,
		"bad committed_at":  `{"table_update": {"table": "t", "committed_at": "yesterday"}}`,
		"not an object":     `{"table_update": [1]}`,
		"eventbridge other": `{"detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2", "detail": {}}`,
	} {
		if _, err := p.Parse([]byte(bad)); !errors.Is(err, signalmsg.ErrUnreadable) {
			t.Errorf("%s: %v, want ErrUnreadable", name, err)
		}
	}
}

// Maestro signal JSON: fields other than the request's join the payload,
// numbers keep every digit, request_time is read; through SNS too.
func TestMaestroSignals(t *testing.T) {
	t.Parallel()
	p := parser(t)
	const body = `{"name": "signal_a", "params": {"foo": "bat", "watermark": 9007199254740993, "updated_by": "tester"},
		"extra": {"source": {"id": "test-id"}}, "request_id": "r-1", "request_time": 1234567}`
	for _, b := range []string{body, sns(body)} {
		r := parse(t, p, b)[0]
		extra, _ := r.Payload["extra"].(map[string]any)
		if r.Name != "signal_a" || r.Params["watermark"] != int64(9007199254740993) || r.RequestID != "r-1" ||
			extra == nil || r.RequestTime.UnixMilli() != 1234567 {
			t.Errorf("%+v", r)
		}
	}
	for name, bad := range map[string]string{
		"empty":          ``,
		"array":          `[1]`,
		"truncated":      `{"name": "s"`,
		"trailing data":  `{"name": "s"} x`,
		"params array":   `{"name": "s", "params": [1]}`,
		"payload string": `{"name": "s", "payload": "x"}`,
		"name number":    `{"name": 7}`,
		"unknown shape":  `{"hello": "world"}`,
		"deep nesting":   sns(sns(sns(sns(body)))),
		"huge":           `{"name": "s", "payload": {"x": "` + strings.Repeat("x", signalmsg.MaxMessageBytes) + `"}}`,
	} {
		if _, err := p.Parse([]byte(bad)); !errors.Is(err, signalmsg.ErrUnreadable) {
			t.Errorf("%s: %v, want ErrUnreadable", name, err)
		}
	}
}
