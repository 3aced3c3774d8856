package sel

import (
	"context"
	"testing"
)

// BenchmarkEvalSimple evaluates a compiled `foo * 2 + 1` (target < 2 µs).
func BenchmarkEvalSimple(b *testing.B) {
	p, err := Compile(`foo * 2 + 1`)
	if err != nil {
		b.Fatal(err)
	}
	env := MapEnv{"foo": int64(41)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Eval(ctx, env); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDateIntsBetween evaluates a compiled
// Util.dateIntsBetween(20200101, 20201231, 1) (target < 100 µs).
func BenchmarkDateIntsBetween(b *testing.B) {
	p, err := Compile(`Util.dateIntsBetween(20200101, 20201231, 1)`)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Eval(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// typicalParam is a representative Maestro parameter expression.
const typicalParam = `
	String d = Util.incrementDateInt(run_date, -1);
	if (params.containsKey('override') && params.get('override') != null) {
	  return params.get('override');
	}
	return "s3://bucket/" + table.toLowerCase() + "/dateint=" + d + "/part-" + String.format("%05d", shard);`

// BenchmarkCompileAndEvalTypical parses and evaluates typicalParam
// (target < 50 µs).
func BenchmarkCompileAndEvalTypical(b *testing.B) {
	env := MapEnv{"run_date": int64(20240722), "table": "Plays", "shard": int64(7)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := Compile(typicalParam)
		if err != nil {
			b.Fatal(err)
		}
		v, err := p.Eval(ctx, env)
		if err != nil {
			b.Fatal(err)
		}
		if v != "s3://bucket/plays/dateint=20240721/part-00007" {
			b.Fatalf("got %v", v)
		}
	}
}
