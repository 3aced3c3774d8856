package tablechange

import "testing"

func TestTableRefRoundTrip(t *testing.T) {
	for _, s := range []string{"sales.orders", "arn:aws:s3tables:us-east-1:000000000000:bucket/wh/sales.orders", "glue/db.t"} {
		ref, err := ParseTableRef(s)
		if err != nil {
			t.Fatalf("ParseTableRef(%q): %v", s, err)
		}
		if got := ref.String(); got != s {
			t.Errorf("ParseTableRef(%q).String() = %q", s, got)
		}
	}
	for _, bad := range []string{"", "orders", ".orders", "sales.", "a/b.c.d"} {
		if _, err := ParseTableRef(bad); err == nil {
			t.Errorf("ParseTableRef(%q) accepted", bad)
		}
	}
}

func TestOperations(t *testing.T) {
	if !Overwrite.RewritesData() || !Delete.RewritesData() || Append.RewritesData() || Replace.RewritesData() {
		t.Error("RewritesData: only overwrite and delete remove rows")
	}
	if Operation("truncate").Valid() || !Append.Valid() {
		t.Error("Valid: only Iceberg's four operations")
	}
}
