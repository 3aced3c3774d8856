package workflow

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// An alias bomb is refused from its parsed tree, before anything is
// expanded: a few hundred bytes cost almost nothing (issue 15, defect 2:
// 620 bytes used to allocate 164 MB before their 400).
func TestYAMLAliasBombIsRefusedCheaply(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	doc := readFile(t, "testdata/hostile/alias-bomb.yaml")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := DecodeYAML(doc)
	runtime.ReadMemStats(&after)
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "expands to more than") {
		t.Fatalf("err = %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2<<20 {
		t.Fatalf("refusing a %d-byte document allocated %d bytes", len(doc), alloc)
	}
}

func TestYAMLBounds(t *testing.T) {
	t.Parallel()
	deep := "Workflow:\n  id: deep\n  x: " + strings.Repeat("[", 300) + strings.Repeat("]", 300) + "\n"
	merges := "Workflow:\n  id: m\n  base: &b {type: NoOp}\n  jobs:\n" +
		strings.Repeat("    - job: {<<: *b, id: j}\n", 1)
	cases := []struct {
		name, doc, want string
	}{
		{"too big", "Workflow:\n  id: big\n  description: " + strings.Repeat("x", MaxYAMLBytes) + "\n", "the limit is 262144"},
		{"too deep", deep, "nests deeper than 256 levels"},
		{"self alias", "a: &a [1, *a]\n", "malformed YAML"},
	}
	for _, c := range cases {
		_, err := DecodeYAML([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	// Aliases used as intended are fine.
	if _, err := DecodeYAML([]byte(merges)); err != nil {
		t.Fatalf("merge key: %v", err)
	}
	var b strings.Builder
	b.WriteString("Workflow:\n  id: reuse\n  common: &c {type: NoOp, timeout: 10}\n  jobs:\n")
	for i := range 200 {
		fmt.Fprintf(&b, "    - job: {<<: *c, id: j%d}\n", i)
	}
	if d, err := DecodeYAML([]byte(b.String())); err != nil || len(d.Workflow.Steps) != 200 {
		t.Fatalf("200 jobs sharing a block: %v", err)
	}
}
