package signalmsg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/engine/trigger/signalmsg"
)

const bucketARN = "arn:aws:s3tables:us-east-1:111122223333:bucket/wh"

func TestTableChangeMessages(t *testing.T) {
	p := &signalmsg.Parser{}
	change := `{"catalog": "` + bucketARN + `", "namespace": "sales", "table": "orders",
	  "snapshot_id": 8744736658442914487, "parent_snapshot_id": 3051729675574597004,
	  "commit_time": "2026-05-01T03:10:00.250Z", "operation": "append"}`
	want := tablechange.Change{Table: tablechange.TableRef{Catalog: bucketARN, Namespace: "sales", Table: "orders"},
		SnapshotID: 8744736658442914487, ParentSnapshotID: 3051729675574597004,
		CommitTime: time.Date(2026, 5, 1, 3, 10, 0, 250e6, time.UTC), Operation: tablechange.Append}
	eventBridge := `{"version": "0", "id": "e1", "detail-type": "Table Change", "source": "my.iceberg.writer",
	  "time": "2026-05-01T03:10:01Z", "region": "us-east-1", "resources": [], "detail": ` + change + `}`
	var ids []string
	for name, body := range map[string]string{
		"direct":      `{"table_change": ` + change + `}`,
		"in SNS":      sns(`{"table_change": ` + change + `}`),
		"EventBridge": eventBridge,
	} {
		got := parse(t, p, body)
		if len(got) != 1 {
			t.Fatalf("%s: %d signals", name, len(got))
		}
		r := got[0]
		if r.Name != bucketARN+"/sales.orders" || !r.RequestTime.Equal(want.CommitTime) {
			t.Errorf("%s: name %q time %v", name, r.Name, r.RequestTime)
		}
		c, err := tablechange.ChangeFromSignalParams(r.Params)
		if err != nil || c != want {
			t.Errorf("%s: params %v read back as %+v, %v; want %+v", name, r.Params, c, err, want)
		}
		if r.Params["table"] != want.Table.String() || r.Params["snapshot_id"] != want.SnapshotID || r.Params["commit_time"] != want.CommitTime.UnixMilli() {
			t.Errorf("%s: params %v", name, r.Params)
		}
		if err := r.Check(); err != nil {
			t.Errorf("%s: signal refused: %v", name, err)
		}
		ids = append(ids, r.RequestID)
	}
	if ids[0] != ids[1] || ids[1] != ids[2] || !strings.HasPrefix(ids[0], "tablechange-") {
		t.Errorf("one commit, three ids: %v", ids)
	}

	// The function the trigger side calls returns the Change too; a
	// signal name overrides the table's, epoch millis and a
	// namespace.table name are read.
	r, c, err := signalmsg.TableChange([]byte(`{"table": "sales.orders", "snapshot_id": 7, "commit_time": 1777777200000,
	  "operation": "overwrite", "signal": "orders_changed"}`), "api")
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "orders_changed" || c.Table != (tablechange.TableRef{Namespace: "sales", Table: "orders"}) || c.ParentSnapshotID != 0 ||
		c.CommitTime.UnixMilli() != 1777777200000 || c.Operation != tablechange.Overwrite || r.Payload["via"] != "api" {
		t.Errorf("got %+v %+v", r, c)
	}
	other, _, err := signalmsg.TableChange([]byte(`{"table": "sales.orders", "snapshot_id": 8, "commit_time": 1777777200000, "operation": "append", "signal": "orders_changed"}`), "api")
	if err != nil || other.RequestID == r.RequestID {
		t.Errorf("another snapshot, same id %q (%v)", other.RequestID, err)
	}

	for name, bad := range map[string]string{
		"no table":         `{"table_change": {"namespace": "sales", "snapshot_id": 1, "commit_time": 1, "operation": "append"}}`,
		"no namespace":     `{"table_change": {"table": "orders", "snapshot_id": 1, "commit_time": 1, "operation": "append"}}`,
		"no snapshot":      `{"table_change": {"table": "sales.orders", "commit_time": 1, "operation": "append"}}`,
		"string snapshot":  `{"table_change": {"table": "sales.orders", "snapshot_id": "x", "commit_time": 1, "operation": "append"}}`,
		"huge snapshot":    `{"table_change": {"table": "sales.orders", "snapshot_id": 99999999999999999999, "commit_time": 1, "operation": "append"}}`,
		"own parent":       `{"table_change": {"table": "sales.orders", "snapshot_id": 2, "parent_snapshot_id": 2, "commit_time": 1, "operation": "append"}}`,
		"no commit time":   `{"table_change": {"table": "sales.orders", "snapshot_id": 1, "operation": "append"}}`,
		"bad commit time":  `{"table_change": {"table": "sales.orders", "snapshot_id": 1, "commit_time": "yesterday", "operation": "append"}}`,
		"bad operation":    `{"table_change": {"table": "sales.orders", "snapshot_id": 1, "commit_time": 1, "operation": "truncate"}}`,
		"unknown field":    `{"table_change": {"table": "sales.orders", "snapshot_id": 1, "commit_time": 1, "operation": "append", "rows": 3}}`,
		"dotted table":     `{"table_change": {"namespace": "sales", "table": "a.b", "snapshot_id": 1, "commit_time": 1, "operation": "append"}}`,
		"not an object":    `{"table_change": [1]}`,
		"bad EventBridge":  `{"detail-type": "Table Change", "source": "x", "detail": {"table": "sales.orders"}}`,
		"Glue, no catalog": glueEvent("UpdateTable"),
	} {
		_, err := p.Parse([]byte(bad))
		if !errors.Is(err, signalmsg.ErrUnreadable) {
			t.Errorf("%s: err = %v, want ErrUnreadable", name, err)
		}
	}
	_, err = p.Parse([]byte(`{"table_change": {"table": "sales.orders", "snapshot_id": 1, "operation": "truncate"}}`))
	if err == nil || !strings.Contains(err.Error(), "commit_time is required") || !strings.Contains(err.Error(), `operation "truncate"`) {
		t.Errorf("every problem reported: %v", err)
	}
}

func glueEvent(typeOfChange string) string {
	return `{"version": "0", "id": "2f1f0b3a-9e6b-4c5e-8d4a-1", "detail-type": "Glue Data Catalog Table State Change",
	  "source": "aws.glue", "account": "111122223333", "time": "2026-05-01T03:10:02Z", "region": "us-east-1",
	  "resources": ["arn:aws:glue:us-east-1:111122223333:table/sales/orders"],
	  "detail": {"databaseName": "sales", "typeOfChange": "` + typeOfChange + `", "tableName": "orders", "changedPartitions": []}}`
}

// s3TablesEvent is an S3 Tables commit as CloudTrail delivers it.
func s3TablesEvent(eventName, errorCode string) string {
	return `{"version": "0", "id": "5c2e-1", "detail-type": "AWS API Call via CloudTrail", "source": "aws.s3tables",
	  "account": "111122223333", "time": "2026-05-01T03:10:02Z", "region": "us-east-1", "resources": [],
	  "detail": {"eventVersion": "1.10", "eventSource": "s3tables.amazonaws.com", "eventName": "` + eventName + `",
	    "errorCode": "` + errorCode + `", "awsRegion": "us-east-1",
	    "requestParameters": {"tableBucketARN": "` + bucketARN + `", "namespace": "sales", "name": "orders",
	      "metadataLocation": "s3://wh-bucket/metadata/00007-x.metadata.json", "versionToken": "abc"}}}`
}

// resolver answers the snapshot of a table's metadata as a catalog would.
type resolver struct {
	calls []string
	err   error
}

func (r *resolver) Snapshot(_ context.Context, t tablechange.TableRef, location string) (tablechange.Change, error) {
	r.calls = append(r.calls, t.String()+" "+location)
	if r.err != nil {
		return tablechange.Change{}, r.err
	}
	return tablechange.Change{Table: t, SnapshotID: 42, ParentSnapshotID: 41, CommitTime: time.UnixMilli(1777777200000).UTC(),
		Operation: tablechange.Append}, nil
}

func TestCatalogEvents(t *testing.T) {
	res := &resolver{}
	p := &signalmsg.Parser{Tables: res}

	glue := parse(t, p, glueEvent("UpdateTable"))
	s3t := parse(t, p, s3TablesEvent("UpdateTableMetadataLocation", ""))
	if len(glue) != 1 || len(s3t) != 1 {
		t.Fatalf("signals: glue %d, s3 tables %d", len(glue), len(s3t))
	}
	if glue[0].Name != "sales.orders" || glue[0].Params["snapshot_id"] != int64(42) || glue[0].Payload["source"] != "glue" {
		t.Errorf("glue signal %+v", glue[0])
	}
	if s3t[0].Name != bucketARN+"/sales.orders" || s3t[0].Params["catalog"] != bucketARN || s3t[0].Payload["source"] != "s3tables" {
		t.Errorf("S3 Tables signal %+v", s3t[0])
	}
	wantCalls := []string{"sales.orders ", bucketARN + "/sales.orders s3://wh-bucket/metadata/00007-x.metadata.json"}
	if fmt.Sprint(res.calls) != fmt.Sprint(wantCalls) {
		t.Errorf("resolver calls %q, want %q", res.calls, wantCalls)
	}
	// Redelivered: the same signal instance.
	if again := parse(t, p, glueEvent("UpdateTable")); again[0].RequestID != glue[0].RequestID {
		t.Error("a redelivered Glue event is another signal")
	}
	// Events that commit nothing announce nothing.
	for _, body := range []string{glueEvent("DeleteTable"), s3TablesEvent("GetTable", ""), s3TablesEvent("UpdateTableMetadataLocation", "ConflictException")} {
		if got := parse(t, p, body); len(got) != 0 {
			t.Errorf("%s: %d signals", body, len(got))
		}
	}
	// Malformed details are unreadable; a catalog failure is not (it may
	// pass).
	for _, bad := range []string{
		`{"detail-type": "Glue Data Catalog Table State Change", "source": "aws.glue", "detail": {"typeOfChange": "UpdateTable"}}`,
		`{"detail-type": "AWS API Call via CloudTrail", "source": "aws.s3tables", "detail": {"eventName": "UpdateTableMetadataLocation", "requestParameters": {}}}`,
	} {
		if _, err := p.Parse([]byte(bad)); !errors.Is(err, signalmsg.ErrUnreadable) {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
	res.err = errors.New("catalog unreachable")
	if _, err := p.Parse([]byte(glueEvent("UpdateTable"))); err == nil || errors.Is(err, signalmsg.ErrUnreadable) {
		t.Errorf("catalog failure: err = %v, want a retryable error", err)
	}
}
