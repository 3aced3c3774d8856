// Package signalmsg turns the messages of the signals queue into signal
// requests. It reads, as docs/signals.md describes them:
//
//   - Maestro signal JSON (SignalCreateRequest: name, params, payload,
//     request_id, request_time; other fields join the payload);
//   - S3 event notifications (ObjectCreated and the other object events),
//     mapped to signals by the configured Rules, with bucket, key, size,
//     etag, the key pattern's values and the key's Hive partitions
//     (dt=2024-05-01) as params;
//   - table-update events ({"table_update": {...}}): "table T got snapshot
//     S, partition P, at watermark W";
//   - table-change events ({"table_change": {...}}, an Iceberg commit
//     announced over the API), Glue Data Catalog Table State Change events
//     and S3 Tables UpdateTableMetadataLocation calls from EventBridge, all
//     normalised into one table-change signal (tablechange.Change);
//   - any of these wrapped in an SNS notification, and S3 object events and
//     table updates delivered by EventBridge.
//
// The same decoding serves the signals Lambda, the REST API's POST
// /api/v3/signals and /api/v3/signals/messages, and `maestro dev`.
package signalmsg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/maestro-aws/maestro/engine/trigger/schedule"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// ErrUnreadable reports a message that is not one of the shapes read here,
// or is malformed: retrying it cannot help (the queue moves it to its
// dead-letter queue after its receive count).
var ErrUnreadable = errors.New("unreadable signal message")

// MaxMessageBytes bounds a message (SQS's own limit is 256 KiB).
const MaxMessageBytes = 256 << 10

// maxDepth bounds how many envelopes (SNS in SNS ...) are opened.
const maxDepth = 3

// Parser reads messages.
type Parser struct {
	// Rules map S3 object events to signals.
	Rules Rules
	// Logger is told of object events no rule takes. Optional.
	Logger *slog.Logger
	// Via names where the messages come from, in S3 and table-update
	// signals' payload ("sqs" when empty; "api" for the REST API).
	Via string
	// Tables reads the snapshot a Glue Data Catalog or S3 Tables event
	// announces (those events do not carry it). Optional: without it such
	// an event is unreadable.
	Tables TableResolver
}

// Parse returns the signal requests a message announces: none for a
// message that announces nothing (an S3 test event, an object event no
// rule takes). A message that cannot be read is ErrUnreadable.
func (p *Parser) Parse(body []byte) ([]signal.Request, error) {
	return p.ParseContext(context.Background(), body)
}

// ParseContext is Parse with the context the reads of a catalog event's
// snapshot (Tables) run under. An error that is not ErrUnreadable may be
// transient (the catalog unreachable).
func (p *Parser) ParseContext(ctx context.Context, body []byte) ([]signal.Request, error) {
	if len(body) > MaxMessageBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrUnreadable, len(body), MaxMessageBytes)
	}
	via := p.Via
	if via == "" {
		via = "sqs"
	}
	return p.parse(ctx, body, 0, via)
}

// envelope holds the fields that tell the shapes apart.
type envelope struct {
	// SNS notification.
	Type     string `json:"Type"`
	TopicArn string `json:"TopicArn"`
	Message  *string
	// EventBridge event.
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Detail     json.RawMessage `json:"detail"`
	// S3 event notification, and S3's test event.
	Records json.RawMessage `json:"Records"`
	Event   string          `json:"Event"`
	// Table update.
	TableUpdate json.RawMessage `json:"table_update"`
	// Table change (an Iceberg commit).
	TableChange json.RawMessage `json:"table_change"`
	// Maestro signal.
	Name *string `json:"name"`
}

func (p *Parser) parse(ctx context.Context, body []byte, depth int, via string) ([]signal.Request, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: more than %d nested envelopes", ErrUnreadable, maxDepth)
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrUnreadable)
	}
	var env envelope
	if err := json.Unmarshal(trimmed, &env); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	switch {
	case env.Type == "Notification" && env.Message != nil && env.TopicArn != "":
		return p.parse(ctx, []byte(*env.Message), depth+1, "sns")
	case env.DetailType != "" && len(env.Detail) > 0:
		return p.eventBridge(ctx, trimmed, env)
	case len(env.Records) > 0:
		return p.s3Event(trimmed, via)
	case env.Event == "s3:TestEvent":
		return nil, nil
	case len(env.TableChange) > 0:
		r, _, err := TableChange(env.TableChange, via)
		if err != nil {
			return nil, err
		}
		return []signal.Request{r}, nil
	case len(env.TableUpdate) > 0:
		r, err := TableUpdate(env.TableUpdate, via)
		if err != nil {
			return nil, err
		}
		return []signal.Request{r}, nil
	case env.Name != nil:
		r, err := DecodeSignal(trimmed)
		if err != nil {
			return nil, err
		}
		return []signal.Request{r}, nil
	}
	return nil, fmt.Errorf("%w: neither a Maestro signal, an S3 event notification, a table update, "+
		"nor an SNS or EventBridge envelope of one", ErrUnreadable)
}

// DecodeSignal decodes Maestro signal JSON (SignalCreateRequest): name,
// params (strings and integers), payload (an object), request_id and
// request_time (epoch milliseconds or RFC 3339); any other field joins the
// payload, as in Maestro. Numbers keep every digit. Malformed JSON is
// ErrUnreadable; the request is checked by the broker (Request.Check).
func DecodeSignal(body []byte) (signal.Request, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil {
		return signal.Request{}, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return signal.Request{}, fmt.Errorf("%w: data after the JSON object", ErrUnreadable)
	}
	if fields == nil {
		return signal.Request{}, fmt.Errorf("%w: not a JSON object", ErrUnreadable)
	}
	var r signal.Request
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		raw := fields[k]
		var err error
		switch k {
		case "name":
			err = json.Unmarshal(raw, &r.Name)
		case "request_id":
			if !isNull(raw) {
				err = json.Unmarshal(raw, &r.RequestID)
			}
		case "request_time":
			r.RequestTime, err = decodeTime(raw)
		case "params":
			if !isNull(raw) {
				err = decodeNumbers(raw, &r.Params)
			}
		case "payload":
			if !isNull(raw) {
				var payload map[string]any
				if err = decodeNumbers(raw, &payload); err == nil {
					r.Payload = merge(r.Payload, payload)
				}
			}
		default:
			var v any
			if err = decodeNumbers(raw, &v); err == nil {
				r.Payload = merge(r.Payload, map[string]any{k: v})
			}
		}
		if err != nil {
			return signal.Request{}, fmt.Errorf("%w: %s: %v", ErrUnreadable, k, err)
		}
	}
	return r, nil
}

func merge(into, from map[string]any) map[string]any {
	if into == nil {
		into = make(map[string]any, len(from))
	}
	maps.Copy(into, from)
	return into
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// decodeNumbers decodes keeping numbers exact (json.Number).
func decodeNumbers(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// decodeTime reads epoch milliseconds or an RFC 3339 string; null and 0
// are no time.
func decodeTime(raw json.RawMessage) (time.Time, error) {
	if isNull(raw) {
		return time.Time{}, nil
	}
	var v any
	if err := decodeNumbers(raw, &v); err != nil {
		return time.Time{}, err
	}
	switch x := v.(type) {
	case json.Number:
		ms, err := x.Int64()
		if err != nil {
			return time.Time{}, fmt.Errorf("%s is not epoch milliseconds", x)
		}
		if ms == 0 {
			return time.Time{}, nil
		}
		return time.UnixMilli(ms), nil
	case string:
		return time.Parse(time.RFC3339Nano, x)
	}
	return time.Time{}, fmt.Errorf("want epoch milliseconds or an RFC 3339 time")
}

// object is one S3 object event, from an S3 notification record or an
// EventBridge event.
type object struct {
	bucket, key, etag, versionID, sequencer, event, region string
	size                                                   int64
	time                                                   time.Time
	via                                                    string
}

// s3Event reads an S3 event notification: its keys are URL-encoded, and
// decoded here.
func (p *Parser) s3Event(body []byte, via string) ([]signal.Request, error) {
	var ev events.S3Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%w: S3 event notification: %v", ErrUnreadable, err)
	}
	var out []signal.Request
	for i, rec := range ev.Records {
		if rec.EventSource != "aws:s3" || rec.S3.Bucket.Name == "" || rec.S3.Object.Key == "" {
			return nil, fmt.Errorf("%w: record %d is not an S3 object event", ErrUnreadable, i)
		}
		reqs, err := p.object(object{bucket: rec.S3.Bucket.Name, key: rec.S3.Object.URLDecodedKey,
			etag: rec.S3.Object.ETag, versionID: rec.S3.Object.VersionID, sequencer: rec.S3.Object.Sequencer,
			event: strings.TrimPrefix(rec.EventName, "s3:"), region: rec.AWSRegion, size: rec.S3.Object.Size,
			time: rec.EventTime, via: via})
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		out = append(out, reqs...)
	}
	return out, nil
}

// eventBridgeS3 is the detail of an S3 event on EventBridge; its key is
// not URL-encoded.
type eventBridgeS3 struct {
	Bucket struct {
		Name string `json:"name"`
	} `json:"bucket"`
	Object struct {
		Key       string `json:"key"`
		Size      int64  `json:"size"`
		ETag      string `json:"etag"`
		VersionID string `json:"version-id"`
		Sequencer string `json:"sequencer"`
	} `json:"object"`
	Reason string `json:"reason"`
}

// eventBridgeReasons maps an S3 EventBridge event's reason to the event
// name's suffix of the S3 notification for the same change.
var eventBridgeReasons = map[string]string{
	"PutObject": "Put", "POST Object": "Post", "CopyObject": "Copy", "CompleteMultipartUpload": "CompleteMultipartUpload",
	"DeleteObject": "Delete", "Lifecycle Expiration": "Delete",
}

// eventBridge reads an EventBridge event: an S3 object event
// (source aws.s3) or a table update (detail-type "Table Update").
func (p *Parser) eventBridge(ctx context.Context, body []byte, env envelope) ([]signal.Request, error) {
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%w: EventBridge event: %v", ErrUnreadable, err)
	}
	if reqs, handled, err := p.catalogEvent(ctx, ev); handled {
		return reqs, err
	}
	switch {
	case ev.DetailType == TableChangeDetailType:
		r, _, err := TableChange(ev.Detail, "eventbridge")
		if err != nil {
			return nil, err
		}
		return []signal.Request{r}, nil
	case ev.Source == "aws.s3" && (ev.DetailType == "Object Created" || ev.DetailType == "Object Deleted"):
		var d eventBridgeS3
		if err := json.Unmarshal(ev.Detail, &d); err != nil {
			return nil, fmt.Errorf("%w: EventBridge S3 event: %v", ErrUnreadable, err)
		}
		if d.Bucket.Name == "" || d.Object.Key == "" {
			return nil, fmt.Errorf("%w: EventBridge S3 event without bucket or key", ErrUnreadable)
		}
		family := "ObjectCreated:"
		if ev.DetailType == "Object Deleted" {
			family = "ObjectRemoved:"
		}
		reason := eventBridgeReasons[d.Reason]
		if reason == "" {
			reason = strings.ReplaceAll(d.Reason, " ", "")
		}
		return p.object(object{bucket: d.Bucket.Name, key: d.Object.Key, etag: d.Object.ETag, versionID: d.Object.VersionID,
			sequencer: d.Object.Sequencer, event: family + reason, region: ev.Region, size: d.Object.Size,
			time: ev.Time, via: "eventbridge"})
	case ev.DetailType == "Table Update":
		r, err := TableUpdate(ev.Detail, "eventbridge")
		if err != nil {
			return nil, err
		}
		return []signal.Request{r}, nil
	}
	return nil, fmt.Errorf("%w: EventBridge event %q from %q is neither an S3 object event, a Glue or S3 Tables table change, a Table Change nor a Table Update",
		ErrUnreadable, env.DetailType, env.Source)
}

// reservedS3Params are the params every S3 signal has; a key's partitions
// and a pattern's values of the same name do not replace them.
var reservedS3Params = []string{"bucket", "key", "size", "etag", "version_id"}

// object turns an object event into the signals of the rules that take it.
func (p *Parser) object(o object) ([]signal.Request, error) {
	var out []signal.Request
	for i := range p.Rules {
		r := &p.Rules[i]
		vals, ok := r.matches(o.bucket, o.key, o.event)
		if !ok {
			continue
		}
		params := map[string]any{}
		for k, v := range r.Params {
			params[k] = v
		}
		for k, v := range hivePartitions(o.key) {
			params[k] = v
		}
		for k, v := range vals {
			params[k] = v
		}
		params["bucket"], params["key"], params["size"] = o.bucket, o.key, o.size
		params["etag"] = strings.Trim(o.etag, `"`)
		if o.versionID != "" {
			params["version_id"] = o.versionID
		}
		name, err := r.signalName(params)
		if err != nil {
			return nil, fmt.Errorf("%w: rule %d: %v", ErrUnreadable, i, err)
		}
		payload := map[string]any{"source": "s3", "via": o.via, "event_name": o.event, "rule": i}
		if o.region != "" {
			payload["region"] = o.region
		}
		if o.sequencer != "" {
			payload["sequencer"] = o.sequencer
		}
		if !o.time.IsZero() {
			payload["event_time"] = o.time.UTC().Format(time.RFC3339Nano)
		}
		// One signal per object change: a redelivered or repeated event of
		// the same change (same key, version and sequencer) is a duplicate.
		change := o.sequencer
		if change == "" || change == "0" {
			change = o.etag
		}
		id := "s3-" + schedule.NameUUID(strings.Join([]string{o.bucket, o.key, o.versionID, change, o.event}, "\x00")).String()
		out = append(out, signal.Request{Name: name, Params: params, Payload: payload, RequestID: id, RequestTime: o.time})
	}
	if len(out) == 0 && p.Logger != nil {
		p.Logger.Warn("S3 object event taken by no signal rule (MAESTRO_S3_SIGNAL_RULES); nothing announced",
			"bucket", o.bucket, "key", o.key, "event_name", o.event)
	}
	return out, nil
}

// hivePartitions returns the key=value segments of a key's directories
// (sales/dt=2024-05-01/hour=03/part-0.parquet), URL-decoded as Hive writes
// them.
func hivePartitions(key string) map[string]string {
	segs := strings.Split(key, "/")
	out := map[string]string{}
	for _, s := range segs[:len(segs)-1] {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" || slices.Contains(reservedS3Params, k) {
			continue
		}
		if dk, err := url.PathUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.PathUnescape(v); err == nil {
			v = dv
		}
		out[k] = v
	}
	return out
}
