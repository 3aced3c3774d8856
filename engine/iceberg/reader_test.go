package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3tables"
	s3tablestypes "github.com/aws/aws-sdk-go-v2/service/s3tables/types"

	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/engine/trigger/signalmsg"
	"github.com/maestro-aws/maestro/localstack"
)

// testTable is an Iceberg table in a fresh S3 Tables table bucket of the
// emulator, reached through its Iceberg REST catalog.
type testTable struct {
	reader *Reader
	bucket string
	ref    tablechange.TableRef
	tbl    *table.Table
}

// newTestTable creates a table bucket, namespace "sales" and table
// "orders" (id long, item string). The table is format version 3: the
// emulator's catalog writes the v3-only next-row-id into v2 metadata,
// which iceberg-go refuses to load.
func newTestTable(t *testing.T) *testTable {
	t.Helper()
	ctx := context.Background()
	cfg := localstack.Config(t)
	bucket := fmt.Sprintf("ince-%d", time.Now().UnixNano())
	arn := createTableBucket(ctx, t, s3tables.NewFromConfig(cfg), bucket)
	r, err := NewReader(Config{CatalogURI: localstack.Endpoint(t) + "/iceberg", Warehouse: arn}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := r.Catalog(ctx, arn)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{"sales"}, nil); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "item", Type: iceberg.PrimitiveTypes.String})
	tbl, err := cat.CreateTable(ctx, table.Identifier{"sales", "orders"}, schema, catalog.WithProperties(iceberg.Properties{"format-version": "3"}))
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	return &testTable{reader: r, bucket: bucket, ref: tablechange.TableRef{Namespace: "sales", Table: "orders"}, tbl: tbl}
}

// createTableBucket creates a table bucket and returns its ARN. On a
// loaded machine the SDK may retry a create whose first attempt the
// emulator did carry out (its answer came late): the retry's conflict on
// this test's own unique name is then the bucket the first one made.
func createTableBucket(ctx context.Context, t *testing.T, client *s3tables.Client, name string) string {
	t.Helper()
	out, err := client.CreateTableBucket(ctx, &s3tables.CreateTableBucketInput{Name: aws.String(name)})
	if err == nil {
		return aws.ToString(out.Arn)
	}
	var conflict *s3tablestypes.ConflictException
	if !errors.As(err, &conflict) {
		t.Fatalf("create table bucket: %v", err)
	}
	list, lerr := client.ListTableBuckets(ctx, &s3tables.ListTableBucketsInput{Prefix: aws.String(name)})
	if lerr != nil {
		t.Fatalf("create table bucket: %v; list it: %v", err, lerr)
	}
	for _, b := range list.TableBuckets {
		if aws.ToString(b.Name) == name {
			return aws.ToString(b.Arn)
		}
	}
	t.Fatalf("create table bucket: %v, and no bucket %s is listed", err, name)
	return ""
}

// rows builds an Arrow table of n rows with ids from first.
func rows(t *testing.T, first, n int64) arrow.Table {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "item", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
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

// append commits n rows and returns the new snapshot's id.
func (tt *testTable) append(t *testing.T, first, n int64) int64 {
	t.Helper()
	at := rows(t, first, n)
	defer at.Release()
	tbl, err := tt.tbl.AppendTable(context.Background(), at, 1024, nil)
	if err != nil {
		t.Fatalf("append %d rows: %v", n, err)
	}
	tt.tbl = tbl
	return tbl.CurrentSnapshot().SnapshotID
}

// overwrite replaces the table's rows by n rows.
func (tt *testTable) overwrite(t *testing.T, first, n int64) int64 {
	t.Helper()
	at := rows(t, first, n)
	defer at.Release()
	tbl, err := tt.tbl.OverwriteTable(context.Background(), at, 1024, nil)
	if err != nil {
		t.Fatalf("overwrite with %d rows: %v", n, err)
	}
	tt.tbl = tbl
	return tbl.CurrentSnapshot().SnapshotID
}

func records(files []tablechange.DataFile) (n int64) {
	for _, f := range files {
		n += f.Records
	}
	return n
}

func TestChangesAgainstS3TablesCatalog(t *testing.T) {
	tt := newTestTable(t)
	s1 := tt.append(t, 0, 3)
	s2 := tt.append(t, 3, 5)
	s3 := tt.append(t, 8, 7)
	s4 := tt.overwrite(t, 100, 4)
	ctx := context.Background()

	type want struct {
		snaps     []int64
		ops       []tablechange.Operation
		files     int
		records   int64
		overwrite bool
	}
	for _, tc := range []struct {
		from, to int64
		want     want
	}{
		{0, s3, want{[]int64{s1, s2, s3}, []tablechange.Operation{"append", "append", "append"}, 3, 15, false}},
		{s1, s3, want{[]int64{s2, s3}, []tablechange.Operation{"append", "append"}, 2, 12, false}},
		{s2, s2, want{nil, nil, 0, 0, false}},
		{s1, s2, want{[]int64{s2}, []tablechange.Operation{"append"}, 1, 5, false}},
		{s3, s4, want{[]int64{s4}, []tablechange.Operation{"overwrite"}, 1, 4, true}},
		{0, s4, want{[]int64{s1, s2, s3, s4}, []tablechange.Operation{"append", "append", "append", "overwrite"}, 4, 19, true}},
	} {
		name := fmt.Sprintf("(%d,%d]", tc.from, tc.to)
		got, err := tt.reader.Changes(ctx, tablechange.Range{Table: tt.ref, FromSnapshotID: tc.from, ToSnapshotID: tc.to})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var ids []int64
		var ops []tablechange.Operation
		for i, c := range got.Snapshots {
			ids = append(ids, c.SnapshotID)
			ops = append(ops, c.Operation)
			wantParent := tc.from
			if i > 0 {
				wantParent = got.Snapshots[i-1].SnapshotID
			}
			if c.ParentSnapshotID != wantParent || c.Table != tt.ref || time.Since(c.CommitTime) > time.Hour || c.CommitTime.After(time.Now().Add(time.Minute)) {
				t.Errorf("%s: snapshot %d = %+v (parent want %d)", name, i, c, wantParent)
			}
		}
		if fmt.Sprint(ids) != fmt.Sprint(tc.want.snaps) || fmt.Sprint(ops) != fmt.Sprint(tc.want.ops) {
			t.Errorf("%s: snapshots %v %v, want %v %v", name, ids, ops, tc.want.snaps, tc.want.ops)
		}
		if len(got.AddedFiles) != tc.want.files || records(got.AddedFiles) != tc.want.records {
			t.Errorf("%s: added %d files of %d records, want %d of %d: %+v", name, len(got.AddedFiles),
				records(got.AddedFiles), tc.want.files, tc.want.records, got.AddedFiles)
		}
		for _, f := range got.AddedFiles {
			if !strings.HasPrefix(f.Path, "s3://") || !strings.HasSuffix(f.Path, ".parquet") || f.SizeBytes <= 0 || !containsID(tc.want.snaps, f.SnapshotID) {
				t.Errorf("%s: added file %+v", name, f)
			}
		}
		if got.HasOverwrite != tc.want.overwrite || got.HasDelete {
			t.Errorf("%s: has_overwrite %v has_delete %v, want %v false", name, got.HasOverwrite, got.HasDelete, tc.want.overwrite)
		}
	}

	for _, bad := range []tablechange.Range{
		{Table: tt.ref, FromSnapshotID: s3, ToSnapshotID: s1},
		{Table: tt.ref, FromSnapshotID: 0, ToSnapshotID: 12345},
		{Table: tt.ref, FromSnapshotID: 777, ToSnapshotID: s2},
	} {
		if _, err := tt.reader.Changes(ctx, bad); !errors.Is(err, ErrNotInHistory) {
			t.Errorf("Changes(%d, %d] = %v, want ErrNotInHistory", bad.FromSnapshotID, bad.ToSnapshotID, err)
		}
	}
	if _, err := tt.reader.Changes(ctx, tablechange.Range{Table: tablechange.TableRef{Namespace: "sales", Table: "nope"}, ToSnapshotID: s1}); err == nil {
		t.Error("Changes on a missing table: no error")
	}
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func TestSnapshotResolvesCatalogEvents(t *testing.T) {
	tt := newTestTable(t)
	ctx := context.Background()
	if c, err := tt.reader.Snapshot(ctx, tt.ref, ""); err != nil || c.SnapshotID != 0 {
		t.Fatalf("empty table: %+v, %v", c, err)
	}
	s1 := tt.append(t, 0, 2)
	location := tt.tbl.MetadataLocation()
	s2 := tt.append(t, 2, 2)
	c, err := tt.reader.Snapshot(ctx, tt.ref, "")
	if err != nil || c.SnapshotID != s2 || c.ParentSnapshotID != s1 || c.Operation != tablechange.Append || c.CommitTime.IsZero() {
		t.Errorf("current: %+v, %v; want snapshot %d on %d", c, err, s2, s1)
	}
	// An S3 Tables event names the metadata file of its commit: the
	// snapshot of that commit, not the table's latest.
	c, err = tt.reader.Snapshot(ctx, tt.ref, location)
	if err != nil || c.SnapshotID != s1 || c.ParentSnapshotID != 0 {
		t.Errorf("at %s: %+v, %v; want snapshot %d", location, c, err, s1)
	}
	if _, err := tt.reader.Snapshot(ctx, tablechange.TableRef{Namespace: "sales", Table: "nope"}, ""); err == nil {
		t.Error("missing table: no error")
	}

	// The S3 Tables commit event of the first commit, as CloudTrail
	// delivers it, becomes the signal of that commit's snapshot.
	ev := fmt.Sprintf(`{"version": "0", "id": "c-1", "detail-type": "AWS API Call via CloudTrail", "source": "aws.s3tables",
	  "account": "000000000000", "time": "2026-05-01T03:10:02Z", "region": "us-east-1", "resources": [],
	  "detail": {"eventSource": "s3tables.amazonaws.com", "eventName": "UpdateTableMetadataLocation",
	    "requestParameters": {"tableBucketARN": %q, "namespace": "sales", "name": "orders", "metadataLocation": %q}}}`,
		tt.reader.cfg.Warehouse, location)
	reqs, err := (&signalmsg.Parser{Tables: tt.reader}).ParseContext(ctx, []byte(ev))
	if err != nil || len(reqs) != 1 {
		t.Fatalf("S3 Tables event: %v, %v", reqs, err)
	}
	if ch, err := tablechange.ChangeFromSignalParams(reqs[0].Params); err != nil || ch.SnapshotID != s1 ||
		reqs[0].Name != tt.reader.cfg.Warehouse+"/sales.orders" {
		t.Errorf("S3 Tables event's signal %+v: %+v, %v", reqs[0], ch, err)
	}
}

func TestManifestsPut(t *testing.T) {
	ctx := context.Background()
	client := s3.NewFromConfig(localstack.Config(t), func(o *s3.Options) { o.UsePathStyle = true })
	bucket := fmt.Sprintf("ince-manifests-%d", time.Now().UnixNano())
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	files := make([]tablechange.DataFile, MaxListedFiles+1)
	for i := range files {
		files[i] = tablechange.DataFile{Path: fmt.Sprintf("s3://wh/data/%05d.parquet", i), Records: 2, SizeBytes: 100, SnapshotID: 9}
	}
	m := Manifests{S3: client, Bucket: bucket, Prefix: "incremental/"}
	uri, err := m.Put(ctx, "wf-1/sales.orders/5-9", files)
	if err != nil {
		t.Fatal(err)
	}
	if uri != "s3://"+bucket+"/incremental/wf-1/sales.orders/5-9.json" {
		t.Errorf("uri %s", uri)
	}
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("incremental/wf-1/sales.orders/5-9.json")})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	var doc ManifestDoc
	if err := json.NewDecoder(out.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Count != len(files) || doc.Records != int64(2*len(files)) || len(doc.Files) != len(files) || doc.Files[1000] != files[1000] {
		t.Errorf("manifest: count %d records %d files %d", doc.Count, doc.Records, len(doc.Files))
	}
	for _, bad := range []Manifests{{S3: client}, {Bucket: bucket}} {
		if _, err := bad.Put(ctx, "k", files); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	if _, err := m.Put(ctx, "../escape", files); err == nil {
		t.Error("a key with .. accepted")
	}
}

// The Reader reads the snapshot of the catalog events signalmsg reads.
var _ signalmsg.TableResolver = (*Reader)(nil)
