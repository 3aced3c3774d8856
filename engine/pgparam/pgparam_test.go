package pgparam_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/pgparam"
)

// A statement whose first parameter is a Hint stores the same values with
// and without Register's plan, and with the plan the buffer is sized at
// once: one allocation of the hinted size, not a regrowth per append.
func TestHintEncodesAsItsValueOnEveryConnection(t *testing.T) {
	url := dbtest.URL(t)
	for _, registered := range []bool{false, true} {
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.ConnectConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if registered {
			pgparam.Register(conn.TypeMap())
		}
		docs := pgtype.FlatArray[[]byte]{[]byte(`{"a": 1}`), []byte(`{"b": "` + strings.Repeat("x", 5000) + `"}`), nil}
		for _, first := range []any{int16(7), "node-1"} {
			args := []any{first, docs, []string{"p", "q", "r"}}
			pgparam.Sized[int16](args)
			pgparam.Sized[string](args)
			if _, ok := args[0].(pgparam.Hint[int16]); !ok {
				if _, ok := args[0].(pgparam.Hint[string]); !ok {
					t.Fatalf("registered=%v: first argument %T not wrapped", registered, args[0])
				}
			}
			var got string
			var n int
			var nulls int
			sql := `SELECT $1::text, count(*), count(*) FILTER (WHERE d IS NULL) FROM unnest($2::jsonb[], $3::text[]) AS u(d, s)`
			if _, isInt := first.(int16); isInt {
				sql = `SELECT ($1::smallint)::text, count(*), count(*) FILTER (WHERE d IS NULL) FROM unnest($2::jsonb[], $3::text[]) AS u(d, s)`
			}
			if err := conn.QueryRow(context.Background(), sql, args...).Scan(&got, &n, &nulls); err != nil {
				t.Fatalf("registered=%v, first %T: %v", registered, first, err)
			}
			want := map[bool]string{true: "7", false: "node-1"}[first == any(int16(7))]
			if got != want || n != 3 || nulls != 1 {
				t.Fatalf("registered=%v: read %q, %d rows, %d nulls; want %q, 3, 1", registered, got, n, nulls, want)
			}
		}
	}
}

// Sized leaves a first argument of another type alone, and Estimate
// counts the bytes of the columns.
func TestSizedAndEstimate(t *testing.T) {
	args := []any{"x", [][]byte{make([]byte, 100), make([]byte, 50)}, []int64{1, 2}}
	pgparam.Sized[int16](args)
	if args[0] != "x" {
		t.Fatalf("Sized[int16] wrapped a string: %T", args[0])
	}
	if n := pgparam.Estimate(args); n < 150+24 || n > 150+3*24+2*12+2*5+1 {
		t.Fatalf("Estimate = %d, want the 150 bytes of the column and a little more", n)
	}
	pgparam.Sized[string](args)
	h, ok := args[0].(pgparam.Hint[string])
	if !ok || h.V != "x" || h.Bytes != pgparam.Estimate([]any{"x", args[1], args[2]}) {
		t.Fatalf("Sized[string] gave %#v", args[0])
	}
	pgparam.Sized[string](nil) // no arguments: nothing to do
}

// With the plan registered, encoding a Hint grows the buffer once.
func TestHintPlanSizesTheBuffer(t *testing.T) {
	m := pgtype.NewMap()
	pgparam.Register(m)
	docs := make(pgtype.FlatArray[[]byte], 200)
	for i := range docs {
		docs[i] = []byte(`{"k": "` + strings.Repeat("v", 1000) + `"}`)
	}
	args := []any{int16(1), docs}
	pgparam.Sized[int16](args)
	buf := make([]byte, 0, 256)
	out, err := m.Encode(pgtype.Int2OID, pgtype.BinaryFormatCode, args[0], buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || cap(out) < pgparam.Estimate(args) {
		t.Fatalf("after the hint: len %d cap %d, want len 2 and room for %d", len(out), cap(out), pgparam.Estimate(args))
	}
	jsonbArray, ok := m.TypeForName("_jsonb")
	if !ok {
		t.Fatal("no _jsonb type")
	}
	before := cap(out)
	out, err = m.Encode(jsonbArray.OID, pgtype.BinaryFormatCode, docs, out)
	if err != nil {
		t.Fatal(err)
	}
	if cap(out) != before {
		t.Fatalf("the array's encoding regrew the hinted buffer: cap %d -> %d (len %d)", before, cap(out), len(out))
	}
}

// Reserve leaves a connection's next statements as they were: what they
// send and read is unchanged, with or without room made, and room larger
// than any statement is harmless.
func TestReserveWritesNothing(t *testing.T) {
	conn, err := pgx.Connect(context.Background(), dbtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, n := range []int{0, 10, 1 << 20} {
		pgparam.Reserve(conn.PgConn(), n)
		b := &pgx.Batch{}
		b.Queue(`SELECT $1::text || 'b'`, "a")
		b.Queue(`SELECT count(*) FROM unnest($1::jsonb[])`, pgtype.FlatArray[[]byte]{[]byte(`{}`), []byte(`[1]`)})
		br := conn.SendBatch(context.Background(), b)
		var s string
		var c int
		if err := br.QueryRow().Scan(&s); err != nil || s != "ab" {
			t.Fatalf("reserve %d: first statement read %q, %v", n, s, err)
		}
		if err := br.QueryRow().Scan(&c); err != nil || c != 2 {
			t.Fatalf("reserve %d: second statement read %d, %v", n, c, err)
		}
		if err := br.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
