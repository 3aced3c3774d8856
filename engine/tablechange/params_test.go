package tablechange

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestSignalParamsRoundTrip(t *testing.T) {
	at := time.Date(2024, 5, 1, 3, 10, 0, 123e6, time.UTC)
	for _, c := range []Change{
		{Table: TableRef{Namespace: "sales", Table: "orders"}, SnapshotID: 8744736658442914487, ParentSnapshotID: 3051729675574597004, CommitTime: at, Operation: Append},
		{Table: TableRef{Catalog: "arn:aws:s3tables:us-east-1:000000000000:bucket/wh", Namespace: "sales", Table: "orders"}, SnapshotID: 1, CommitTime: at, Operation: Overwrite},
	} {
		p := c.SignalParams()
		if p["table"] != c.Table.String() || p["namespace"] != c.Table.Namespace || p["catalog"] != c.Table.Catalog {
			t.Errorf("table params = %v", p)
		}
		if p["commit_time"] != at.UnixMilli() || p["snapshot_id"] != c.SnapshotID || p["operation"] != string(c.Operation) {
			t.Errorf("params = %v", p)
		}
		got, err := ChangeFromSignalParams(p)
		if err != nil {
			t.Fatalf("ChangeFromSignalParams(%v): %v", p, err)
		}
		if got != c {
			t.Errorf("round trip = %+v, want %+v", got, c)
		}
		// As a stored signal holds it: JSON with numbers kept exact.
		b, _ := json.Marshal(p)
		var stored map[string]any
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		if err := dec.Decode(&stored); err != nil {
			t.Fatal(err)
		}
		got, err = ChangeFromSignalParams(stored)
		if err != nil || got != c {
			t.Errorf("from stored JSON = %+v, %v; want %+v", got, err, c)
		}
	}
}

func TestChangeFromSignalParamsLenient(t *testing.T) {
	got, err := ChangeFromSignalParams(map[string]any{"namespace": "sales", "table": "orders", "snapshot_id": 7,
		"commit_time": "2024-05-01T03:10:00Z", "operation": "delete"})
	if err != nil {
		t.Fatal(err)
	}
	want := Change{Table: TableRef{Namespace: "sales", Table: "orders"}, SnapshotID: 7,
		CommitTime: time.Date(2024, 5, 1, 3, 10, 0, 0, time.UTC), Operation: Delete}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestChangeFromSignalParamsRefuses(t *testing.T) {
	ok := map[string]any{"table": "sales.orders", "snapshot_id": int64(2), "parent_snapshot_id": int64(1),
		"commit_time": int64(1714532400000), "operation": "append"}
	with := func(k string, v any) map[string]any {
		p := map[string]any{}
		for kk, vv := range ok {
			p[kk] = vv
		}
		if v == nil {
			delete(p, k)
		} else {
			p[k] = v
		}
		return p
	}
	if _, err := ChangeFromSignalParams(ok); err != nil {
		t.Fatalf("good params refused: %v", err)
	}
	for name, tc := range map[string]struct {
		p    map[string]any
		want string
	}{
		"no table":          {with("table", nil), "table is required"},
		"bad table":         {with("table", "orders"), "namespace.table"},
		"table not string":  {with("table", int64(3)), "want a STRING"},
		"no snapshot":       {with("snapshot_id", nil), "snapshot_id is required"},
		"fraction snapshot": {with("snapshot_id", 1.5), "not an exact integer"},
		"huge snapshot":     {with("snapshot_id", json.Number("99999999999999999999")), "not a 64-bit integer"},
		"no commit time":    {with("commit_time", nil), "commit_time is required"},
		"bad commit time":   {with("commit_time", "yesterday"), "commit_time"},
		"no operation":      {with("operation", nil), "operation is required"},
		"bad operation":     {with("operation", "truncate"), `operation "truncate"`},
		"namespace differs": {with("namespace", "hr"), "disagrees"},
		"catalog differs":   {with("catalog", "glue"), "disagrees"},
		"own parent":        {with("parent_snapshot_id", int64(2)), "its own parent"},
	} {
		_, err := ChangeFromSignalParams(tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", name, err, tc.want)
		}
	}
}
