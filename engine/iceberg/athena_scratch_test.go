package iceberg

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/aws/aws-sdk-go-v2/service/athena/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/localstack"
)

func athenaQuery(t *testing.T, q string) ([][]string, error) {
	ctx := context.Background()
	cfg := localstack.Config(t)
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	_, _ = s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("ince-athena-out")})
	ac := athena.NewFromConfig(cfg)
	out, err := ac.StartQueryExecution(ctx, &athena.StartQueryExecutionInput{QueryString: aws.String(q),
		ResultConfiguration: &types.ResultConfiguration{OutputLocation: aws.String("s3://ince-athena-out/r/")}})
	if err != nil {
		return nil, err
	}
	for {
		st, err := ac.GetQueryExecution(ctx, &athena.GetQueryExecutionInput{QueryExecutionId: out.QueryExecutionId})
		if err != nil {
			return nil, err
		}
		s := st.QueryExecution.Status.State
		if s == types.QueryExecutionStateFailed {
			return nil, fmt.Errorf("failed: %s", aws.ToString(st.QueryExecution.Status.StateChangeReason))
		}
		if s == types.QueryExecutionStateSucceeded {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	res, err := ac.GetQueryResults(ctx, &athena.GetQueryResultsInput{QueryExecutionId: out.QueryExecutionId})
	if err != nil {
		return nil, err
	}
	var rows [][]string
	for _, r := range res.ResultSet.Rows {
		var row []string
		for _, d := range r.Data {
			row = append(row, aws.ToString(d.VarCharValue))
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func TestScratchAthena(t *testing.T) {
	tt := newTestTable(t)
	s1 := tt.append(t, 0, 3)
	s2 := tt.append(t, 3, 5)
	s3 := tt.append(t, 8, 7)
	bucket := tt.reader.cfg.Warehouse[strings.LastIndex(tt.reader.cfg.Warehouse, "/")+1:]
	tbl := fmt.Sprintf(`"s3tablescatalog/%s"."sales"."orders"`, bucket)
	for _, q := range []string{
		"SELECT count(*) FROM " + tbl,
		fmt.Sprintf("SELECT count(*) FROM %s AT (VERSION => %d)", tbl, s2),
		fmt.Sprintf("SELECT count(*) FROM (SELECT * FROM %s AT (VERSION => %d) EXCEPT ALL SELECT * FROM %s AT (VERSION => %d))", tbl, s3, tbl, s1),
		fmt.Sprintf("SELECT count(*), min(filename) FROM %s", tbl),
		fmt.Sprintf("SELECT count(*) FROM (SELECT * FROM %s FOR VERSION AS OF %d EXCEPT ALL SELECT * FROM %s FOR VERSION AS OF %d)", tbl, s3, tbl, s1),
	} {
		rows, err := athenaQuery(t, q)
		t.Logf("%s => %v %v", q, rows, err)
	}
	files, _ := tt.reader.Changes(context.Background(), tablechangeRange(tt, s1, s3))
	var paths []string
	for _, f := range files.AddedFiles {
		paths = append(paths, "'"+f.Path+"'")
	}
	q := "SELECT count(*) FROM " + tbl + " WHERE \"$path\" IN (" + strings.Join(paths, ",") + ")"
	rows, err := athenaQuery(t, q)
	t.Logf("%s => %v %v", q, rows, err)
}

func tablechangeRange(tt *testTable, from, to int64) tablechange.Range {
	return tablechange.Range{Table: tt.ref, FromSnapshotID: from, ToSnapshotID: to}
}
