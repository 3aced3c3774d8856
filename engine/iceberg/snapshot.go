package iceberg

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go/table"

	"github.com/maestro-aws/maestro/engine/tablechange"
)

// Snapshot returns, as a Change, the current snapshot of the table's
// metadata file metadataLocation (what an S3 Tables commit event names),
// or of the table's current metadata when it is empty (a Glue Data Catalog
// event names none). A table without a snapshot is a zero Change.
func (r *Reader) Snapshot(ctx context.Context, t tablechange.TableRef, metadataLocation string) (tablechange.Change, error) {
	tbl, err := r.LoadTable(ctx, t)
	if err != nil {
		return tablechange.Change{}, err
	}
	if metadataLocation != "" && metadataLocation != tbl.MetadataLocation() {
		tbl, err = table.NewFromLocation(ctx, tbl.Identifier(), metadataLocation, tbl.FS, nil)
		if err != nil {
			return tablechange.Change{}, fmt.Errorf("read the metadata %s of %s: %w", metadataLocation, t, err)
		}
	}
	s := tbl.CurrentSnapshot()
	if s == nil {
		return tablechange.Change{}, nil
	}
	return snapshotChange(t, *s), nil
}
