package signalmsg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/engine/trigger/schedule"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// TableChangeMessage is a commit to an Apache Iceberg table announced over
// the API or the queue: the message body {"table_change": TableChangeMessage},
// or the detail of an EventBridge event of detail-type "Table Change".
//
//	{"table_change": {"catalog": "arn:aws:s3tables:us-east-1:111122223333:bucket/wh",
//	  "namespace": "sales", "table": "orders", "snapshot_id": 8744736658442914487,
//	  "parent_snapshot_id": 3051729675574597004, "commit_time": "2026-05-01T03:10:00Z",
//	  "operation": "append"}}
type TableChangeMessage struct {
	// Catalog names the catalog (an S3 Tables table bucket ARN); empty
	// for the default one.
	Catalog string `json:"catalog,omitempty"`
	// Namespace is the table's namespace (database); it may instead lead
	// Table ("sales.orders").
	Namespace string `json:"namespace,omitempty"`
	// Table is the table's name, or namespace.table.
	Table string `json:"table"`
	// SnapshotID is the snapshot the commit made (required).
	SnapshotID json.Number `json:"snapshot_id"`
	// ParentSnapshotID is the snapshot it was made on (0 or absent: none).
	ParentSnapshotID json.Number `json:"parent_snapshot_id,omitempty"`
	// CommitTime is when: RFC 3339 or epoch milliseconds (required).
	CommitTime json.RawMessage `json:"commit_time"`
	// Operation is append, overwrite, delete or replace (required).
	Operation string `json:"operation"`
	// Signal is the signal's name; the table reference's when empty.
	Signal string `json:"signal,omitempty"`
}

// TableChange turns a table-change message into its signal and the
// change it describes (tablechange.Change.SignalParams as params; request
// id derived from the table and the snapshot, so a redelivered commit is a
// duplicate; request time the commit time).
func TableChange(raw json.RawMessage, via string) (signal.Request, tablechange.Change, error) {
	var m TableChangeMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return signal.Request{}, tablechange.Change{}, fmt.Errorf("%w: table change: %v", ErrUnreadable, err)
	}
	c, err := m.change()
	if err != nil {
		return signal.Request{}, tablechange.Change{}, fmt.Errorf("%w: table change: %v", ErrUnreadable, err)
	}
	return ChangeSignal(c, m.Signal, map[string]any{"source": "table_change", "via": via}), c, nil
}

// change checks the message and returns its Change.
func (m TableChangeMessage) change() (tablechange.Change, error) {
	var problems []error
	ref := tablechange.TableRef{Catalog: m.Catalog, Namespace: m.Namespace, Table: m.Table}
	if m.Namespace == "" {
		if ns, t, ok := strings.Cut(m.Table, "."); ok {
			ref.Namespace, ref.Table = ns, t
		}
	}
	switch {
	case ref.Table == "":
		problems = append(problems, errors.New("table is required"))
	case ref.Namespace == "":
		problems = append(problems, errors.New("namespace is required (or a table named namespace.table)"))
	case strings.Contains(ref.Table, ".") || strings.Contains(ref.Namespace, "/") || strings.Contains(ref.Table, "/"):
		problems = append(problems, fmt.Errorf("table %q in namespace %q: neither may hold '/', nor the table '.'", ref.Table, ref.Namespace))
	}
	c := tablechange.Change{Table: ref, Operation: tablechange.Operation(m.Operation)}
	if m.SnapshotID == "" {
		problems = append(problems, errors.New("snapshot_id is required"))
	} else if n, err := m.SnapshotID.Int64(); err != nil || n == 0 {
		problems = append(problems, fmt.Errorf("snapshot_id %s: want a non-zero 64-bit integer", m.SnapshotID))
	} else {
		c.SnapshotID = n
	}
	if m.ParentSnapshotID != "" {
		if n, err := m.ParentSnapshotID.Int64(); err != nil {
			problems = append(problems, fmt.Errorf("parent_snapshot_id %s: want a 64-bit integer", m.ParentSnapshotID))
		} else {
			c.ParentSnapshotID = n
		}
	}
	if c.SnapshotID != 0 && c.SnapshotID == c.ParentSnapshotID {
		problems = append(problems, fmt.Errorf("snapshot_id %d is its own parent", c.SnapshotID))
	}
	if t, err := decodeTime(m.CommitTime); len(m.CommitTime) == 0 || (err == nil && t.IsZero()) {
		problems = append(problems, errors.New("commit_time is required"))
	} else if err != nil {
		problems = append(problems, fmt.Errorf("commit_time: %v", err))
	} else {
		c.CommitTime = t.UTC()
	}
	if !c.Operation.Valid() {
		problems = append(problems, fmt.Errorf("operation %q: want append, overwrite, delete or replace", m.Operation))
	}
	return c, errors.Join(problems...)
}

// ChangeSignal is the table-change signal of a change: named name (the
// table reference's string when empty), params Change.SignalParams, the
// payload given, request id derived from the table and the snapshot.
func ChangeSignal(c tablechange.Change, name string, payload map[string]any) signal.Request {
	if name == "" {
		name = c.Table.String()
	}
	id := "tablechange-" + schedule.NameUUID(fmt.Sprintf("%s\x00%s\x00%d", name, c.Table, c.SnapshotID)).String()
	return signal.Request{Name: name, Params: c.SignalParams(), Payload: payload, RequestID: id, RequestTime: c.CommitTime}
}

// TableResolver finds the snapshot a catalog event announces: Glue Data
// Catalog and S3 Tables events name the table (and S3 Tables' the new
// metadata file) but not the snapshot. engine/iceberg's Reader is one.
type TableResolver interface {
	// Snapshot returns the current snapshot of the table's metadata file
	// metadataLocation, or of the table's current metadata when it is
	// empty, as a Change.
	Snapshot(ctx context.Context, t tablechange.TableRef, metadataLocation string) (tablechange.Change, error)
}

// The EventBridge events of catalogs read here.
const (
	// GlueTableStateChange is the Glue Data Catalog's event for a table
	// created, updated (an Iceberg commit updates its metadata_location)
	// or deleted (source aws.glue).
	GlueTableStateChange = "Glue Data Catalog Table State Change"
	// CloudTrailAPICall is the detail-type of the S3 Tables API calls
	// CloudTrail delivers to EventBridge (source aws.s3tables); an
	// Iceberg commit is UpdateTableMetadataLocation.
	CloudTrailAPICall = "AWS API Call via CloudTrail"
	// TableChangeDetailType is a custom event's detail-type whose detail
	// is a TableChangeMessage.
	TableChangeDetailType = "Table Change"
)

// glueTableState is the detail of a Glue Data Catalog Table State Change.
type glueTableState struct {
	DatabaseName string `json:"databaseName"`
	TableName    string `json:"tableName"`
	TypeOfChange string `json:"typeOfChange"`
}

// s3TablesAPICall is the detail of an S3 Tables API call from CloudTrail.
type s3TablesAPICall struct {
	EventSource       string `json:"eventSource"`
	EventName         string `json:"eventName"`
	ErrorCode         string `json:"errorCode"`
	RequestParameters struct {
		TableBucketARN   string `json:"tableBucketARN"`
		Namespace        string `json:"namespace"`
		Name             string `json:"name"`
		MetadataLocation string `json:"metadataLocation"`
	} `json:"requestParameters"`
}

// catalogEvent reads a Glue Data Catalog table state change or an S3
// Tables UpdateTableMetadataLocation call: handled is false for an event
// of neither kind. An event that names no commit (a table created without
// data, a failed call, a deleted table) announces nothing; the snapshot it
// made is read through the resolver, which must be configured.
func (p *Parser) catalogEvent(ctx context.Context, ev events.CloudWatchEvent) (reqs []signal.Request, handled bool, err error) {
	var (
		ref      tablechange.TableRef
		location string
		payload  = map[string]any{"via": "eventbridge", "event_id": ev.ID}
	)
	switch {
	case ev.Source == "aws.glue" && ev.DetailType == GlueTableStateChange:
		var d glueTableState
		if err := json.Unmarshal(ev.Detail, &d); err != nil {
			return nil, true, fmt.Errorf("%w: %s: %v", ErrUnreadable, GlueTableStateChange, err)
		}
		if d.DatabaseName == "" || d.TableName == "" {
			return nil, true, fmt.Errorf("%w: %s without databaseName or tableName", ErrUnreadable, GlueTableStateChange)
		}
		if d.TypeOfChange != "UpdateTable" && d.TypeOfChange != "CreateTable" {
			p.logInfo("Glue table state change that commits nothing; nothing announced",
				"database", d.DatabaseName, "table", d.TableName, "type_of_change", d.TypeOfChange)
			return nil, true, nil
		}
		ref = tablechange.TableRef{Namespace: d.DatabaseName, Table: d.TableName}
		payload["source"], payload["type_of_change"] = "glue", d.TypeOfChange
	case ev.Source == "aws.s3tables" && ev.DetailType == CloudTrailAPICall:
		var d s3TablesAPICall
		if err := json.Unmarshal(ev.Detail, &d); err != nil {
			return nil, true, fmt.Errorf("%w: S3 Tables API call: %v", ErrUnreadable, err)
		}
		if d.EventName != "UpdateTableMetadataLocation" || d.ErrorCode != "" {
			p.logInfo("S3 Tables API call that commits nothing; nothing announced", "event_name", d.EventName, "error_code", d.ErrorCode)
			return nil, true, nil
		}
		rp := d.RequestParameters
		if rp.TableBucketARN == "" || rp.Namespace == "" || rp.Name == "" {
			return nil, true, fmt.Errorf("%w: S3 Tables UpdateTableMetadataLocation without tableBucketARN, namespace or name", ErrUnreadable)
		}
		ref = tablechange.TableRef{Catalog: rp.TableBucketARN, Namespace: rp.Namespace, Table: rp.Name}
		location = rp.MetadataLocation
		payload["source"], payload["metadata_location"] = "s3tables", location
	default:
		return nil, false, nil
	}
	if p.Tables == nil {
		return nil, true, fmt.Errorf("%w: %s event for table %s carries no snapshot, and no Iceberg catalog is configured to read it "+
			"(MAESTRO_ICEBERG_CATALOG_URI); or announce the commit as a table_change message", ErrUnreadable, ev.DetailType, ref)
	}
	c, err := p.Tables.Snapshot(ctx, ref, location)
	if err != nil {
		// Possibly transient (the catalog unreachable): not ErrUnreadable.
		return nil, true, fmt.Errorf("read the snapshot of %s: %w", ref, err)
	}
	if c.SnapshotID == 0 {
		p.logInfo("table has no snapshot yet; nothing announced", "table", ref.String())
		return nil, true, nil
	}
	if c.CommitTime.IsZero() && !ev.Time.IsZero() {
		c.CommitTime = ev.Time.UTC()
	}
	return []signal.Request{ChangeSignal(c, "", payload)}, true, nil
}

func (p *Parser) logInfo(msg string, args ...any) {
	if p.Logger != nil {
		p.Logger.Info(msg, args...)
	}
}
