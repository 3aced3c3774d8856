package sel

import (
	"fmt"
	"regexp"
	"strings"
)

// s3TablesBucketARN matches an S3 Tables table bucket ARN, whose tables
// Athena names in the catalog "s3tablescatalog/<bucket>".
var s3TablesBucketARN = regexp.MustCompile(`^arn:aws[a-z-]*:s3tables:[a-z0-9-]+:[0-9]{12}:bucket/([a-z0-9_-]+)$`)

// sqlIdent quotes an SQL identifier.
func sqlIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// icebergTableSQL renders a table reference as an SQL table name: the
// reference the incremental trigger's table param holds,
// [catalog/]namespace.table, where an S3 Tables table bucket ARN is the
// catalog "s3tablescatalog/<bucket>". A reference already quoted (holding
// a double quote) is used as it is.
func icebergTableSQL(ref string) (string, error) {
	if strings.Contains(ref, `"`) {
		return ref, nil
	}
	catalog, rest := "", ref
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		catalog, rest = ref[:i], ref[i+1:]
	}
	ns, table, ok := strings.Cut(rest, ".")
	if !ok || ns == "" || table == "" || strings.Contains(table, ".") {
		return "", fmt.Errorf("table %q: want [catalog/]namespace.table", ref)
	}
	name := sqlIdent(ns) + "." + sqlIdent(table)
	switch m := s3TablesBucketARN.FindStringSubmatch(catalog); {
	case m != nil:
		return sqlIdent("s3tablescatalog/"+m[1]) + "." + name, nil
	case catalog != "":
		return sqlIdent(catalog) + "." + name, nil
	}
	return name, nil
}

// utilIcebergRangeQuery is Util.icebergRangeQuery(table, fromSnapshotId,
// toSnapshotId[, dialect]): a query of the rows the snapshots after
// fromSnapshotId (exclusive; 0 is the table's beginning) up to
// toSnapshotId (inclusive) added, by time travel: the table as of to,
// except all of the table as of from. For an append-only range these are
// exactly the appended rows. dialect is "athena" (Trino's FOR VERSION AS
// OF, the default) or "duckdb" (AT (VERSION => id)).
func utilIcebergRangeQuery(st *state, p int, a []value) value {
	if a[0].k != kString {
		st.fail(p, KindType, "Util.icebergRangeQuery: the table must be a String, found %s", a[0].typeName())
	}
	table, err := icebergTableSQL(a[0].s)
	if err != nil {
		st.fail(p, KindRuntime, "Util.icebergRangeQuery: %v", err)
	}
	from := st.selLong(p, a[1], "from snapshot id")
	to := st.selLong(p, a[2], "to snapshot id")
	if from < 0 || to <= 0 {
		st.fail(p, KindRuntime, "Util.icebergRangeQuery: snapshot ids must be positive (from may be 0), found %d and %d", from, to)
	}
	dialect := "athena"
	if len(a) == 4 {
		if a[3].k != kString {
			st.fail(p, KindType, "Util.icebergRangeQuery: the dialect must be a String, found %s", a[3].typeName())
		}
		dialect = strings.ToLower(a[3].s)
	}
	var asOf func(id int64) string
	switch dialect {
	case "athena", "trino":
		asOf = func(id int64) string { return fmt.Sprintf("SELECT * FROM %s FOR VERSION AS OF %d", table, id) }
	case "duckdb":
		asOf = func(id int64) string { return fmt.Sprintf("SELECT * FROM %s AT (VERSION => %d)", table, id) }
	default:
		st.fail(p, KindRuntime, "Util.icebergRangeQuery: dialect %q: want athena or duckdb", a[3].s)
	}
	if from == 0 {
		return strV(asOf(to))
	}
	return strV(asOf(to) + " EXCEPT ALL " + asOf(from))
}
