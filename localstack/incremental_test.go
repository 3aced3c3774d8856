package localstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	athenasdk "github.com/aws/aws-sdk-go-v2/service/athena"
	athenatypes "github.com/aws/aws-sdk-go-v2/service/athena/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3tables"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/iceberg"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/athena"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/localstack"
)

// incrementalWorkflow is an incremental workflow on table ref whose
// Athena step counts the rows of its run's range with the query
// Util.icebergRangeQuery renders (DuckDB's dialect: the emulator's Athena
// runs on DuckDB), then a NoOp step keeps the count.
func incrementalWorkflow(id, ref, results string) string {
	query := `'SELECT count(*) AS n FROM (' + Util.icebergRangeQuery(table, from_snapshot_id, to_snapshot_id, 'duckdb') + ')'`
	return fmt.Sprintf(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": %q,
	  "signal_triggers": [{"incremental": true, "definitions": {%q: {}}}],
	  "steps": [
	    {"step": {"id": "count", "type": "Athena", "transition": {"successors": {"keep": "true"}}, "params": {"athena": {"type": "MAP", "value": {
	      "query": {"type": "STRING", "expression": %q},
	      "output_location": {"type": "STRING", "value": "s3://%s/incremental/"}}}}}},
	    {"step": {"id": "keep", "type": "NoOp", "params": {
	      "rows": {"type": "LONG", "expression": "Long.parseLong(params.getFromStep('count', 'first_row').get('n'))"}}}}]}}`,
		id, ref, query, results)
}

// The emulator scenario: an Iceberg table in the emulator's S3
// Tables, three appends committed through its Iceberg REST catalog with
// iceberg-go, each commit announced over the API's message shape
// ({"table_change"} to POST /api/v3/signals/messages: the emulator emits
// no S3 Tables event); each change starts a run of an incremental workflow
// (the API's broker has the Iceberg reader, which gives the run the files
// its range added), whose Athena step counts
// exactly the rows of its range; the counts sum to the table's rows.
func TestIncrementalIcebergInEmulator(t *testing.T) {
	ctx := context.Background()
	cfg := localstack.Config(t)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)

	// The table: format version 3 (the emulator's catalog writes a v3
	// field into v2 metadata, which iceberg-go refuses).
	tb, err := s3tables.NewFromConfig(cfg).CreateTableBucket(ctx, &s3tables.CreateTableBucketInput{Name: aws.String("incr-" + suffix)})
	if err != nil {
		t.Fatalf("create table bucket: %v", err)
	}
	warehouse := aws.ToString(tb.Arn)
	reader, err := iceberg.NewReader(iceberg.Config{CatalogURI: localstack.Endpoint(t) + "/iceberg", Warehouse: warehouse}, cfg, flowtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	cat, err := reader.Catalog(ctx, warehouse)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{"sales"}, nil); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	tbl, err := cat.CreateTable(ctx, table.Identifier{"sales", "orders"}, iceberggo.NewSchema(0,
		iceberggo.NestedField{ID: 1, Name: "id", Type: iceberggo.PrimitiveTypes.Int64, Required: true},
		iceberggo.NestedField{ID: 2, Name: "item", Type: iceberggo.PrimitiveTypes.String}),
		catalog.WithProperties(iceberggo.Properties{"format-version": "3"}))
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	ref := tablechange.TableRef{Catalog: warehouse, Namespace: "sales", Table: "orders"}

	// The engine: the Athena step against the emulator, the signal broker
	// with the Iceberg reader and manifests, the signals function's
	// handler in front of it.
	results := "incr-results-" + suffix
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(results)}); err != nil {
		t.Fatal(err)
	}
	ar, err := athena.New(athenasdk.NewFromConfig(cfg), awsjob.Config{MinPoll: 200 * time.Millisecond, MaxPoll: time.Second, Logger: flowtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	env := flowtest.New(t)
	env.Engine(stepruntime.Registry{athena.Type: ar, "NoOp": stepruntime.NoOp{}}, flow.Config{})
	manifests := &iceberg.Manifests{S3: s3c, Bucket: results, Prefix: "manifests/"}
	srv, err := api.New(api.Config{DB: env.Pool, Logger: flowtest.Logger(), Definitions: env.Defs, Runs: env.Runs,
		TrustUserHeader: true, Iceberg: reader, IcebergManifests: manifests})
	if err != nil {
		t.Fatal(err)
	}
	// announce posts a commit to the REST API as a writer announces it.
	announce := func(msg string) {
		t.Helper()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/api/v3/signals/messages", strings.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("user", "writer")
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("announce %s: %d %s", msg, rec.Code, rec.Body)
		}
	}
	env.Push(incrementalWorkflow("incr-orders", ref.String(), results))

	sizes := []int64{3, 5, 7}
	var first, sum int64
	var prevSnapshot int64
	for i, n := range sizes {
		tbl = appendRows(t, tbl, first, n)
		first += n
		snap := tbl.CurrentSnapshot()
		// The commit announced over the REST API.
		msg := fmt.Sprintf(`{"table_change": {"catalog": %q, "namespace": "sales", "table": "orders", "snapshot_id": %d,
		  "parent_snapshot_id": %d, "commit_time": %d, "operation": "append"}}`,
			warehouse, snap.SnapshotID, prevSnapshot, snap.TimestampMs)
		announce(msg)
		inst := &execution.Instance{WorkflowID: "incr-orders", InstanceID: int64(i + 1), RunID: 1}
		got := env.Wait(inst, 3*time.Minute)
		if got.Status != instance.WorkflowSucceeded {
			for _, a := range env.Attempts(inst, "count") {
				t.Logf("count: %s %s", a.Status, a.Timeline)
			}
			t.Fatalf("run %d ended %s", i+1, got.Status)
		}
		p := runParams(t, got)
		if fmt.Sprint(p["from_snapshot_id"]) != strconv.FormatInt(prevSnapshot, 10) {
			t.Errorf("run %d: from_snapshot_id %v, want %d", i+1, p["from_snapshot_id"], prevSnapshot)
		}
		if fmt.Sprint(p["to_snapshot_id"]) != strconv.FormatInt(snap.SnapshotID, 10) || fmt.Sprint(p["added_records"]) != strconv.FormatInt(n, 10) ||
			fmt.Sprint(p["added_files_count"]) != "1" {
			t.Errorf("run %d params: %v", i+1, p)
		}
		rows := stepParam(t, env, got, "keep", "rows")
		if rows != float64(n) {
			t.Errorf("run %d: the Athena step counted %v rows, want %d (outputs %s)", i+1, rows, n, env.Attempts(got, "count")[0].Outputs)
		}
		if f, ok := rows.(float64); ok {
			sum += int64(f)
		}
		prevSnapshot = snap.SnapshotID
	}
	// The same commit again is the same signal: no fourth run.
	again := fmt.Sprintf(`{"table_change": {"catalog": %q, "namespace": "sales", "table": "orders", "snapshot_id": %d,
	  "commit_time": 1, "operation": "append"}}`, warehouse, prevSnapshot)
	announce(again)
	var runs int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instance WHERE workflow_id = 'incr-orders'`).Scan(&runs); err != nil || runs != 3 {
		t.Errorf("%d runs (%v), want 3", runs, err)
	}
	total := athenaCountRows(t, athenasdk.NewFromConfig(cfg), results,
		fmt.Sprintf(`SELECT count(*) AS n FROM "s3tablescatalog/incr-%s"."sales"."orders"`, suffix))
	if sum != total || total != 15 {
		t.Errorf("the runs counted %d rows, the table has %d; want 15", sum, total)
	}

	// An overwrite: its run is flagged, and reads the rows it wrote.
	at := arrowRows(100, 4)
	defer at.Release()
	tbl, err = tbl.OverwriteTable(ctx, at, 1024, nil)
	if err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	snap := tbl.CurrentSnapshot()
	announce(fmt.Sprintf(`{"table_change": {"catalog": %q, "namespace": "sales", "table": "orders", "snapshot_id": %d,
	  "parent_snapshot_id": %d, "commit_time": %d, "operation": "overwrite"}}`, warehouse, snap.SnapshotID, prevSnapshot, snap.TimestampMs))
	got := env.Wait(&execution.Instance{WorkflowID: "incr-orders", InstanceID: 4, RunID: 1}, 3*time.Minute)
	p := runParams(t, got)
	if got.Status != instance.WorkflowSucceeded || fmt.Sprint(p["has_overwrite"]) != "true" || fmt.Sprint(p["added_records"]) != "4" {
		t.Errorf("overwrite run %s, params %v", got.Status, p)
	}
	if rows := stepParam(t, env, got, "keep", "rows"); rows != float64(4) {
		t.Errorf("overwrite run counted %v rows, want the 4 it wrote", rows)
	}
}

// arrowRows is an Arrow table of n rows with ids from first.
func arrowRows(first, n int64) arrow.Table {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "item", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := first; i < first+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("item-%d", i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	return array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
}

// appendRows commits n rows with ids from first.
func appendRows(t *testing.T, tbl *table.Table, first, n int64) *table.Table {
	t.Helper()
	at := arrowRows(first, n)
	defer at.Release()
	next, err := tbl.AppendTable(context.Background(), at, 1024, nil)
	if err != nil {
		t.Fatalf("append %d rows: %v", n, err)
	}
	return next
}

// runParams decodes a run's params to name -> value (numbers exact).
func runParams(t *testing.T, inst *execution.Instance) map[string]any {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(inst.Params, &raw); err != nil {
		t.Fatalf("run params %s: %v", inst.Params, err)
	}
	out := map[string]any{}
	for k, v := range raw {
		var p struct{ Value any }
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		if err := dec.Decode(&p); err == nil && p.Value != nil {
			out[k] = p.Value
		} else {
			out[k] = strings.TrimSpace(string(v))
		}
	}
	return out
}

// athenaCountRows runs a one-count query through the emulator's Athena.
func athenaCountRows(t *testing.T, ac *athenasdk.Client, results, query string) int64 {
	t.Helper()
	ctx := context.Background()
	out, err := ac.StartQueryExecution(ctx, &athenasdk.StartQueryExecutionInput{QueryString: aws.String(query),
		ResultConfiguration: &athenatypes.ResultConfiguration{OutputLocation: aws.String("s3://" + results + "/total/")}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		st, err := ac.GetQueryExecution(ctx, &athenasdk.GetQueryExecutionInput{QueryExecutionId: out.QueryExecutionId})
		if err != nil {
			t.Fatal(err)
		}
		switch st.QueryExecution.Status.State {
		case athenatypes.QueryExecutionStateSucceeded:
			res, err := ac.GetQueryResults(ctx, &athenasdk.GetQueryResultsInput{QueryExecutionId: out.QueryExecutionId})
			if err != nil || len(res.ResultSet.Rows) != 2 {
				t.Fatalf("results: %v", err)
			}
			n, err := strconv.ParseInt(aws.ToString(res.ResultSet.Rows[1].Data[0].VarCharValue), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		case athenatypes.QueryExecutionStateFailed:
			t.Fatalf("%s: %s", query, aws.ToString(st.QueryExecution.Status.StateChangeReason))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not done in 2 minutes", query)
	return 0
}
