package workflow

import (
	"fmt"
	"strings"
	"testing"
)

// bigDAG returns a definition of n steps (n a multiple of 10) made of blocks: a head that fans
// out to six branches under SEL conditions, a join, and a two-step chain to the next block.
// Steps carry params, tags, timeouts and retry policies like real definitions do.
func bigDAG(n int) string {
	var sb strings.Builder
	sb.WriteString(`{"properties":{"owner":"bench","run_strategy":{"rule":"PARALLEL","workflow_concurrency":10}},"workflow":{"id":"bench.dag","timeout":"12h",` +
		`"params":{"threshold":{"value":100,"type":"LONG"},"day":{"expression":"new DateTime().toString('yyyyMMdd')","type":"STRING"}},"steps":[`)
	step := func(id, typ, extra string, succ map[string]string) {
		if sb.Len() > 0 && !strings.HasSuffix(sb.String(), "[") {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"step":{"id":%q,"type":%q%s`, id, typ, extra)
		if len(succ) > 0 {
			sb.WriteString(`,"transition":{"successors":{`)
			first := true
			for _, k := range sortedKeys(succ) {
				if !first {
					sb.WriteString(",")
				}
				first = false
				fmt.Fprintf(&sb, "%q:%q", k, succ[k])
			}
			sb.WriteString("}}")
		}
		sb.WriteString("}}")
	}
	blocks := n / 10
	for b := range blocks {
		id := func(s string) string { return fmt.Sprintf("b%03d.%s", b, s) }
		fan := map[string]string{}
		for i := 1; i <= 6; i++ {
			fan[id(fmt.Sprintf("branch%d", i))] = fmt.Sprintf("params.getFromStep('%s', 'rows') > threshold * %d", id("head"), i)
		}
		step(id("head"), "NoOp", `,"params":{"rows":{"value":1000,"type":"LONG"},"table":{"value":"db.t","type":"STRING"}},"tags":["bench"]`, fan)
		for i := 1; i <= 6; i++ {
			step(id(fmt.Sprintf("branch%d", i)), "Http",
				`,"timeout":"30min","retry_policy":{"error_retry_limit":2,"backoff":{"type":"EXPONENTIAL_BACKOFF","error_retry_backoff_in_secs":30}},`+
					`"params":{"http":{"type":"MAP","value":{"url":{"value":"https://example.com/x","type":"STRING"}}},"ids":{"value":[1,2,3],"type":"LONG_ARRAY"}}`,
				map[string]string{id("join"): "true"})
		}
		step(id("join"), "NoOp", "", map[string]string{id("post"): fmt.Sprintf("day != '%d'", b)})
		step(id("post"), "Sleep", `,"sleep_seconds":1`, map[string]string{id("tail"): "true"})
		next := map[string]string{}
		if b+1 < blocks {
			next[fmt.Sprintf("b%03d.head", b+1)] = "true"
		}
		step(id("tail"), "NoOp", `,"params":{"out":{"expression":"params.getFromStep('`+id("head")+`', 'rows') + 1","type":"LONG"}}`, next)
	}
	sb.WriteString("]}}")
	return sb.String()
}

func nopCheck(string) error { return nil }

func TestBigDAGIsValid(t *testing.T) {
	t.Parallel()
	d := mustDecode(t, bigDAG(1000))
	if len(d.Workflow.Steps) != 1000 {
		t.Fatalf("%d steps", len(d.Workflow.Steps))
	}
	if err := (Validator{CheckExpression: nopCheck}).Validate(d); err != nil {
		t.Fatal(err)
	}
	g, err := BuildDAG(d.Workflow.Steps)
	if err != nil {
		t.Fatal(err)
	}
	if order := g.TopoOrder(); len(order) != 1000 || order[0] != "b000.head" || order[999] != "b099.tail" {
		t.Fatalf("topo order %d %v...", len(order), order[:3])
	}
}

func BenchmarkValidate1000StepDAG(b *testing.B) {
	d, err := DecodeJSON([]byte(bigDAG(1000)))
	if err != nil {
		b.Fatal(err)
	}
	v := Validator{CheckExpression: nopCheck}
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Validate(d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeJSON1000StepDAG(b *testing.B) {
	data := []byte(bigDAG(1000))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuildDAG1000(b *testing.B) {
	d, err := DecodeJSON([]byte(bigDAG(1000)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := BuildDAG(d.Workflow.Steps); err != nil {
			b.Fatal(err)
		}
	}
}
