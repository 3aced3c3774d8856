package signals_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
	"github.com/maestro-aws/maestro/functions/internal/signals"
)

// catalog answers a table's current snapshot as the Iceberg catalog would
// (an in-memory stand-in for engine/iceberg, whose own tests read a real
// catalog).
type catalog struct{ snapshot int64 }

func (c catalog) Snapshot(_ context.Context, t tablechange.TableRef, _ string) (tablechange.Change, error) {
	if c.snapshot == 0 {
		return tablechange.Change{}, errors.New("catalog unreachable")
	}
	return tablechange.Change{Table: t, SnapshotID: c.snapshot, ParentSnapshotID: c.snapshot - 1,
		CommitTime: time.UnixMilli(1777777200000).UTC(), Operation: tablechange.Append}, nil
}

const glueOrders = `{"version":"0","id":"g-1","detail-type":"Glue Data Catalog Table State Change","source":"aws.glue",
"account":"111122223333","time":"2026-05-01T03:10:02Z","region":"eu-west-1","resources":["arn:aws:glue:eu-west-1:111122223333:table/sales/orders"],
"detail":{"databaseName":"sales","typeOfChange":"UpdateTable","tableName":"orders","changedPartitions":[]}}`

// Table-change messages, announced over the queue and as Glue events,
// become one signal per (table, snapshot): a redelivered commit or a Glue
// event of the same snapshot is a duplicate, and each new snapshot starts
// a run of the workflow whose signal trigger waits for the table.
func TestHandlerTableChanges(t *testing.T) {
	t.Parallel()
	ft := flowtest.New(t)
	h, err := signals.New(signals.Config{Broker: signalbroker.New(ft.Pool, ft.Runs, flowtest.Logger()),
		Tables: catalog{snapshot: 43}, Logger: flowtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ft.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "on-orders",
		"signal_triggers": [{"definitions": {"sales.orders": {}}}],
		"steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`)
	change := func(snapshot, parent string) string {
		return `{"table_change": {"namespace": "sales", "table": "orders", "snapshot_id": ` + snapshot +
			`, "parent_snapshot_id": ` + parent + `, "commit_time": 1777777100000, "operation": "append"}}`
	}
	res, err := h.Handle(context.Background(), batch(
		change("42", "0"), // m0: a run
		change("42", "0"), // m1: the same commit again
		glueOrders,        // m2: snapshot 43, read from the catalog: a run
		`{"table_change": {"namespace": "sales", "table": "orders", "snapshot_id": 44, "operation": "append"}}`, // m3: no commit_time
	))
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range res.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if strings.Join(failed, ",") != "m3" {
		t.Fatalf("batch item failures %v, want m3", failed)
	}
	count := func(sql string) int {
		var n int
		if err := ft.Pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM signal_instance WHERE name = 'sales.orders'`); n != 2 {
		t.Errorf("%d signal instances, want 2 (snapshots 42 and 43)", n)
	}
	if n := count(`SELECT count(*) FROM signal_instance WHERE name = 'sales.orders' AND (params->>'snapshot_id')::bigint IN (42, 43)
		AND params->>'operation' = 'append' AND params->>'table' = 'sales.orders' AND params->>'namespace' = 'sales'`); n != 2 {
		t.Errorf("%d signal instances with the table-change params, want 2", n)
	}
	if n := count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'on-orders'`); n != 2 {
		t.Errorf("%d runs, want 2", n)
	}

	// Without a catalog, a Glue event cannot be read (it fails, then the
	// DLQ); a catalog failure fails the message too, so SQS offers it
	// again.
	for _, tables := range []signals.Config{{}, {Tables: catalog{}}} {
		tables.Broker, tables.Logger = signalbroker.New(ft.Pool, ft.Runs, flowtest.Logger()), flowtest.Logger()
		h, err := signals.New(tables)
		if err != nil {
			t.Fatal(err)
		}
		res, err := h.Handle(context.Background(), batch(glueOrders))
		if err != nil || len(res.BatchItemFailures) != 1 {
			t.Errorf("tables %v: %+v, %v; want the message failed", tables.Tables, res, err)
		}
	}
}
