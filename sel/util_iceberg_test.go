package sel

import "testing"

var icebergCases = []evalCase{
	{name: "append range", src: `Util.icebergRangeQuery("sales.orders", 5, 9)`,
		want: `SELECT * FROM "sales"."orders" FOR VERSION AS OF 9 EXCEPT ALL SELECT * FROM "sales"."orders" FOR VERSION AS OF 5`},
	{name: "from the beginning", src: `Util.icebergRangeQuery("sales.orders", 0, 8744736658442914487)`,
		want: `SELECT * FROM "sales"."orders" FOR VERSION AS OF 8744736658442914487`},
	{name: "S3 Tables catalog", src: `Util.icebergRangeQuery("arn:aws:s3tables:us-east-1:111122223333:bucket/wh/sales.orders", "1", "2")`,
		want: `SELECT * FROM "s3tablescatalog/wh"."sales"."orders" FOR VERSION AS OF 2 EXCEPT ALL SELECT * FROM "s3tablescatalog/wh"."sales"."orders" FOR VERSION AS OF 1`},
	{name: "other catalog", src: `Util.icebergRangeQuery("awsdatacatalog/sales.orders", 1, 2, "athena")`,
		want: `SELECT * FROM "awsdatacatalog"."sales"."orders" FOR VERSION AS OF 2 EXCEPT ALL SELECT * FROM "awsdatacatalog"."sales"."orders" FOR VERSION AS OF 1`},
	{name: "duckdb", src: `Util.icebergRangeQuery("sales.orders", 1, 2, "duckdb")`,
		want: `SELECT * FROM "sales"."orders" AT (VERSION => 2) EXCEPT ALL SELECT * FROM "sales"."orders" AT (VERSION => 1)`},
	{name: "quoted as is", src: `Util.icebergRangeQuery('"my db"."t"', 0, 3)`, want: `SELECT * FROM "my db"."t" FOR VERSION AS OF 3`},
	{name: "in a count", src: `"SELECT count(*) AS n FROM (" + Util.icebergRangeQuery("sales.orders", 0, 3) + ")"`,
		want: `SELECT count(*) AS n FROM (SELECT * FROM "sales"."orders" FOR VERSION AS OF 3)`},
	{src: `Util.icebergRangeQuery("orders", 1, 2)`, errKind: KindRuntime, errHas: "namespace.table"},
	{src: `Util.icebergRangeQuery(1, 1, 2)`, errKind: KindType},
	{src: `Util.icebergRangeQuery("sales.orders", -1, 2)`, errKind: KindRuntime, errHas: "positive"},
	{src: `Util.icebergRangeQuery("sales.orders", 1, 0)`, errKind: KindRuntime, errHas: "positive"},
	{src: `Util.icebergRangeQuery("sales.orders", 1, 2, "spark")`, errKind: KindRuntime, errHas: "dialect"},
	{src: `Util.icebergRangeQuery("sales.orders", 1)`, errKind: KindType},
}

func TestUtilIcebergRangeQuery(t *testing.T) { t.Parallel(); run(t, icebergCases) }
