package iceberg

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/engine/trigger/signalmsg"
	"github.com/maestro-aws/maestro/localstack"
)

// The same reads through the Glue Data Catalog's Iceberg REST catalog
// (the warehouse is the account id, calls are signed for glue): the
// emulator serves it at the same /iceberg path. Format version 3, as for
// S3 Tables (the emulator's v2 metadata holds a v3 field).
func TestChangesAgainstGlueCatalog(t *testing.T) {
	ctx := context.Background()
	cfg := localstack.Config(t)
	// The emulator's Glue catalog keeps its tables' files in this bucket.
	const bucket = "ministack-glue-warehouse"
	_, _ = s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }).CreateBucket(ctx,
		&s3.CreateBucketInput{Bucket: aws.String(bucket)})
	r, err := NewReader(Config{CatalogURI: localstack.Endpoint(t) + "/iceberg", Warehouse: "000000000000"}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := r.Catalog(ctx, "000000000000")
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("glue_%d", time.Now().UnixNano())
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "item", Type: iceberg.PrimitiveTypes.String})
	tbl, err := cat.CreateTable(ctx, table.Identifier{ns, "orders"}, schema,
		catalog.WithLocation("s3://"+bucket+"/"+ns+"/orders"), catalog.WithProperties(iceberg.Properties{"format-version": "3"}))
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	tt := &testTable{reader: r, ref: tablechange.TableRef{Namespace: ns, Table: "orders"}, tbl: tbl}
	s1 := tt.append(t, 0, 4)
	s2 := tt.append(t, 4, 6)
	got, err := r.Changes(ctx, tablechange.Range{Table: tt.ref, ToSnapshotID: s2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Snapshots) != 2 || got.Snapshots[0].SnapshotID != s1 || got.Snapshots[1].SnapshotID != s2 ||
		len(got.AddedFiles) != 2 || records(got.AddedFiles) != 10 {
		t.Errorf("changes %+v", got)
	}
	c, err := r.Snapshot(ctx, tt.ref, "")
	if err != nil || c.SnapshotID != s2 || c.ParentSnapshotID != s1 {
		t.Errorf("current snapshot %+v, %v; want %d", c, err, s2)
	}

	// A Glue Data Catalog Table State Change of the table becomes the
	// table-change signal of its current snapshot.
	ev := fmt.Sprintf(`{"version": "0", "id": "g-1", "detail-type": "Glue Data Catalog Table State Change", "source": "aws.glue",
	  "account": "000000000000", "time": "2026-05-01T03:10:02Z", "region": "us-east-1", "resources": [],
	  "detail": {"databaseName": %q, "typeOfChange": "UpdateTable", "tableName": "orders"}}`, ns)
	reqs, err := (&signalmsg.Parser{Tables: r}).ParseContext(ctx, []byte(ev))
	if err != nil || len(reqs) != 1 {
		t.Fatalf("Glue event: %v, %v", reqs, err)
	}
	if ch, err := tablechange.ChangeFromSignalParams(reqs[0].Params); err != nil || ch.SnapshotID != s2 || ch.ParentSnapshotID != s1 ||
		reqs[0].Name != ns+".orders" {
		t.Errorf("Glue event's signal %+v: %+v, %v", reqs[0], ch, err)
	}
}
