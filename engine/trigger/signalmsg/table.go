package signalmsg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/maestro-aws/maestro/engine/trigger/schedule"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// Update is a table-update event: table Table got a new snapshot (or
// partition) at a watermark. It is the message body {"table_update":
// Update}, or the detail of an EventBridge event of detail-type "Table
// Update"; a Glue or Iceberg commit notification maps onto it (an
// EventBridge input transformer does; docs/signals.md).
//
//	{"table_update": {"table": "warehouse.sales", "snapshot_id": 8744736658442914487,
//	  "partition": {"dt": "2024-05-01", "hour": 3}, "watermark": 1714532400000,
//	  "operation": "append", "committed_at": "2024-05-01T03:10:00Z"}}
type Update struct {
	// Table names the table (required).
	Table string `json:"table"`
	// Signal is the signal name; the table's name when empty.
	Signal string `json:"signal,omitempty"`
	// SnapshotID identifies the table's new snapshot (a LONG or a
	// string), when the table format has snapshots.
	SnapshotID any `json:"snapshot_id,omitempty"`
	// Partition holds the values of the partition that changed (strings
	// or integers); each becomes a param of its name.
	Partition map[string]any `json:"partition,omitempty"`
	// Watermark is how far the table's data is complete (a LONG, such as
	// epoch milliseconds).
	Watermark any `json:"watermark,omitempty"`
	// Operation is the kind of change (append, overwrite, ...).
	Operation string `json:"operation,omitempty"`
	// CommittedAt is when the change was committed (RFC 3339 or epoch
	// milliseconds): the signal's request time.
	CommittedAt json.RawMessage `json:"committed_at,omitempty"`
	// Params are further params of the signal (strings or integers).
	Params map[string]any `json:"params,omitempty"`
	// Payload is carried along, not indexed.
	Payload map[string]any `json:"payload,omitempty"`
}

// reservedTableParams are the params a table update sets itself.
var reservedTableParams = []string{"table", "snapshot_id", "watermark", "operation"}

// TableUpdate turns a table update's JSON into its signal: params table,
// snapshot_id, watermark, operation, each partition value and the extra
// params; request id derived from the table, snapshot, partition and
// watermark, so a redelivered update is a duplicate.
func TableUpdate(raw json.RawMessage, via string) (signal.Request, error) {
	var u Update
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&u); err != nil {
		return signal.Request{}, fmt.Errorf("%w: table update: %v", ErrUnreadable, err)
	}
	if strings.TrimSpace(u.Table) == "" {
		return signal.Request{}, fmt.Errorf("%w: table update: table is required", ErrUnreadable)
	}
	params := map[string]any{}
	for k, v := range u.Params {
		params[k] = v
	}
	for k, v := range u.Partition {
		if slices.Contains(reservedTableParams, k) {
			return signal.Request{}, fmt.Errorf("%w: table update: partition %q has the name of a table update param", ErrUnreadable, k)
		}
		params[k] = v
	}
	params["table"] = u.Table
	if u.SnapshotID != nil {
		params["snapshot_id"] = u.SnapshotID
	}
	if u.Watermark != nil {
		params["watermark"] = u.Watermark
	}
	if u.Operation != "" {
		params["operation"] = u.Operation
	}
	when, err := decodeTime(u.CommittedAt)
	if len(u.CommittedAt) > 0 && err != nil {
		return signal.Request{}, fmt.Errorf("%w: table update: committed_at: %v", ErrUnreadable, err)
	}
	payload := map[string]any{}
	for k, v := range u.Payload {
		payload[k] = v
	}
	payload["source"], payload["via"] = "table_update", via
	name := u.Signal
	if name == "" {
		name = u.Table
	}
	key, _ := json.Marshal(map[string]any{"table": u.Table, "snapshot_id": u.SnapshotID, "partition": u.Partition,
		"watermark": u.Watermark, "operation": u.Operation})
	id := "table-" + schedule.NameUUID(name+"\x00"+string(key)).String()
	return signal.Request{Name: name, Params: params, Payload: payload, RequestID: id, RequestTime: when}, nil
}
