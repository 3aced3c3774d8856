package sel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

var limitCases = []evalCase{
	{src: `int i = 0; while (true) { i++; }`, errKind: KindLimit, errHas: "loop limit 25001"},
	{src: `for (int i = 0; i < 25000; i++) {} 1`, want: int64(1)},
	{name: "25001 iterations break the limit as in Maestro", src: `for (int i = 0; i < 25001; i++) {}`, errKind: KindLimit},
	{src: `for (;;) {}`, errKind: KindLimit},
	{src: `for (long v : new long[20000]) {} int n = 0; for (int i = 0; i < 200; i++) for (int j = 0; j < 200; j++) n++; n`, want: int64(40000)},
	{src: `new int[25000].length`, want: int64(25000)},
	{src: `new int[25001]`, errKind: KindLimit, errHas: "array size is over the limit"},
	{src: `String s = "x"; while (true) { s = s + s; }`, errKind: KindLimit},
	{src: `String s = "x"; while (true) { s += s; }`, errKind: KindLimit},
	{src: `"x".repeat(2000000)`, errKind: KindLimit},
	{src: `String.format("%1000000000d", 1)`, errKind: KindLimit},
	{src: `String.format("%.1000000000f", 1.0)`, errKind: KindLimit},
	{src: `String s = "abcdefghij"; for (int i = 0; i < 20; i++) { s = s.replace("a", s); } s.length()`, errKind: KindLimit},
	{src: `String[] a = new String[20000]; for (int i = 0; i < 20000; i++) { a[i] = "0123456789"; } String.join(",", a).length()`, want: int64(219999)},
	{src: `Map m = new HashMap(); for (int i = 0; i < 24000; i++) { m.put("key" + i, i); } m.size()`, want: int64(24000)},
	{src: `int x = 0; for (int i = 0; i < 600; i++) { x += i; }`, opts: []Option{WithLimits(Limits{MaxVisits: 1000})}, errKind: KindLimit, errHas: "visit limit"},
	{src: `String s = ""; for (int i = 0; i < 1000; i++) { s += "abcdefghij"; }`, opts: []Option{WithLimits(Limits{MaxMemoryBytes: 10000})}, errKind: KindLimit, errHas: "memory limit"},
	{src: `for (int i = 0; i < 10; i++) {}`, opts: []Option{WithLimits(Limits{MaxLoopIterations: 5})}, errKind: KindLimit},
	{src: `new long[10]`, opts: []Option{WithLimits(Limits{MaxArrayLength: 10})}, errKind: KindLimit},
	{src: `"abc" + "def"`, opts: []Option{WithLimits(Limits{MaxStringLength: 5})}, errKind: KindLimit},
	{src: `"abcdef".split("")`, opts: []Option{WithLimits(Limits{MaxArrayLength: 4})}, errKind: KindLimit},
	{src: `1 + 2`, opts: []Option{WithLimits(Limits{MaxSourceLength: 5})}, errKind: KindLimit, errHas: "expression length"},
	{src: `((((1))))`, opts: []Option{WithLimits(Limits{MaxStackDepth: 4})}, errKind: KindLimit, errHas: "nested too deeply"},
}

func TestLimits(t *testing.T) { t.Parallel(); run(t, limitCases) }

func TestDefaultLimits(t *testing.T) {
	t.Parallel()
	d := DefaultLimits()
	if d.MaxSourceLength != 10000 || d.MaxLoopIterations != 25001 || d.MaxArrayLength != 25001 ||
		d.MaxStackDepth != 128 || d.MaxVisits != 100_000_000 || d.MaxMemoryBytes != 100_000_000 || d.MaxStringLength <= 0 {
		t.Fatalf("DefaultLimits() = %+v", d)
	}
	if got := (Limits{}).withDefaults(); got != d {
		t.Fatalf("zero limits do not default: %+v", got)
	}
}

func TestSourceLengthLimit(t *testing.T) {
	t.Parallel()
	ok := strings.Repeat("1+", 4999) + "1" // 9999 characters
	if _, err := Compile(ok); err != nil {
		t.Fatalf("9999 characters: %v", err)
	}
	_, err := Compile(ok + "+1")
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindLimit {
		t.Fatalf("10001 characters: %v", err)
	}
}

func TestStackDepthLimit(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200)
	_, err := Compile(deep)
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindLimit {
		t.Fatalf("deep parentheses: %v", err)
	}
	for _, src := range []string{
		strings.Repeat("-", 300) + "1",
		strings.Repeat("{", 200) + strings.Repeat("}", 200),
		strings.Repeat("if (true) ", 200) + "1;",
		strings.Repeat("f(", 200) + strings.Repeat(")", 200),
		strings.Repeat("a[", 200) + "0" + strings.Repeat("]", 200),
	} {
		if _, err := Compile(src); !errors.As(err, &se) || se.Kind != KindLimit {
			t.Fatalf("%.20s...: want a limit error, got %v", src, err)
		}
	}
	// A long left-associative chain is not deep.
	if _, err := evalSrc(strings.Repeat("1 + ", 1000)+"1", nil); err != nil {
		t.Fatalf("long chain: %v", err)
	}
}

func TestContextCancellation(t *testing.T) {
	t.Parallel()
	p, err := Compile(`while (true) {}`, WithLimits(Limits{MaxLoopIterations: 1 << 62, MaxVisits: 1 << 62}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = p.Eval(ctx, nil)
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindLimit || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancellation took %v", d)
	}
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := p.Eval(done, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}
