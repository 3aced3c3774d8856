package iceberg

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/athena"
	athenatypes "github.com/aws/aws-sdk-go-v2/service/athena/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/localstack"
	"github.com/maestro-aws/maestro/sel"
)

// athenaCount runs a query whose one row is one count through the
// emulator's Athena and returns it.
func athenaCount(t *testing.T, query string) int64 {
	t.Helper()
	ctx := context.Background()
	cfg := localstack.Config(t)
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	const results = "ince-range-query-results"
	_, _ = s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(results)})
	ac := athena.NewFromConfig(cfg)
	out, err := ac.StartQueryExecution(ctx, &athena.StartQueryExecutionInput{QueryString: aws.String(query),
		ResultConfiguration: &athenatypes.ResultConfiguration{OutputLocation: aws.String("s3://" + results + "/q/")}})
	if err != nil {
		t.Fatalf("start %s: %v", query, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := ac.GetQueryExecution(ctx, &athena.GetQueryExecutionInput{QueryExecutionId: out.QueryExecutionId})
		if err != nil {
			t.Fatal(err)
		}
		switch st.QueryExecution.Status.State {
		case athenatypes.QueryExecutionStateFailed, athenatypes.QueryExecutionStateCancelled:
			t.Fatalf("%s: %s\n(the emulator's Athena reads S3 Tables with DuckDB's iceberg extension, which `make emulator` installs)",
				query, aws.ToString(st.QueryExecution.Status.StateChangeReason))
		case athenatypes.QueryExecutionStateSucceeded:
			res, err := ac.GetQueryResults(ctx, &athena.GetQueryResultsInput{QueryExecutionId: out.QueryExecutionId})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.ResultSet.Rows) != 2 || len(res.ResultSet.Rows[1].Data) != 1 {
				t.Fatalf("%s: %d rows", query, len(res.ResultSet.Rows))
			}
			n, err := strconv.ParseInt(aws.ToString(res.ResultSet.Rows[1].Data[0].VarCharValue), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done in 2 minutes", query)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The query Util.icebergRangeQuery renders, run by the emulator's Athena
// (DuckDB with its iceberg extension, reading S3 Tables through the
// emulator's REST catalog), counts exactly the rows of each range: the
// records of the files the Reader lists for it, and the ranges of a
// partition of the history add up to the table.
func TestRangeQueryCountsEachRangeInEmulatorAthena(t *testing.T) {
	tt := newTestTable(t)
	sizes := []int64{3, 5, 7}
	var snaps []int64
	var first int64
	for _, n := range sizes {
		snaps = append(snaps, tt.append(t, first, n))
		first += n
	}
	ref := tablechange.TableRef{Catalog: tt.reader.cfg.Warehouse, Namespace: "sales", Table: "orders"}
	prog, err := sel.Compile(`"SELECT count(*) AS n FROM (" + Util.icebergRangeQuery(table, from_snapshot_id, to_snapshot_id, "duckdb") + ")"`)
	if err != nil {
		t.Fatal(err)
	}
	count := func(from, to int64) (athenaRows, readerRecords int64) {
		q, err := prog.Eval(context.Background(), sel.MapEnv{"table": ref.String(), "from_snapshot_id": from, "to_snapshot_id": to})
		if err != nil {
			t.Fatal(err)
		}
		ch, err := tt.reader.Changes(context.Background(), tablechange.Range{Table: ref, FromSnapshotID: from, ToSnapshotID: to})
		if err != nil {
			t.Fatal(err)
		}
		return athenaCount(t, q.(string)), records(ch.AddedFiles)
	}
	var sum int64
	prev := int64(0)
	for i, s := range snaps {
		rows, recs := count(prev, s)
		if rows != sizes[i] || recs != sizes[i] {
			t.Errorf("range (%d, %d]: Athena counts %d rows, the reader %d records; want %d", prev, s, rows, recs, sizes[i])
		}
		sum += rows
		prev = s
	}
	if rows, recs := count(snaps[0], snaps[2]); rows != 12 || recs != 12 {
		t.Errorf("range (s1, s3]: %d rows, %d records; want 12", rows, recs)
	}
	total := athenaCount(t, fmt.Sprintf(`SELECT count(*) FROM "s3tablescatalog/%s"."sales"."orders"`, tt.bucket))
	if sum != total || total != 15 {
		t.Errorf("ranges sum to %d rows, the table has %d; want 15", sum, total)
	}
}
