package sel

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var paramCases = []evalCase{
	{src: `foo * 2 + 1`, env: MapEnv{"foo": 41}, want: int64(83)},
	{src: `params.get('foo')`, env: MapEnv{"foo": int64(41)}, want: int64(41)},
	{src: `params['foo'] + 1`, env: MapEnv{"foo": int32(41)}, want: int64(42)},
	{src: `params.containsKey('foo')`, env: MapEnv{"foo": 1}, want: true},
	{src: `params.containsKey('nope')`, env: MapEnv{"foo": 1}, want: false},
	{src: `missing == null`, env: MapEnv{}, want: true},
	{src: `params.get('missing')`, want: nil},
	{src: `n * 2`, env: MapEnv{"n": jsonNumber("1.5")}, want: 3.0},
	{src: `n * 2`, env: MapEnv{"n": jsonNumber("7")}, want: int64(14)},
	{src: `f * 2`, env: MapEnv{"f": float32(0.5)}, want: 1.0},
	{src: `list.length`, env: MapEnv{"list": []any{"a", "b"}}, want: int64(2)},
	{src: `list[0] + list[1]`, env: MapEnv{"list": []any{jsonNumber("1"), jsonNumber("2")}}, want: int64(3)},
	{src: `m.get("k")`, env: MapEnv{"m": map[string]any{"k": []int{1, 2}}}, want: []int64{1, 2}},
	{src: `b ? "y" : "n"`, env: MapEnv{"b": true}, want: "y"},
	{name: "a local shadows the param after assignment", src: `x = x + 1; x`, env: MapEnv{"x": 1}, want: int64(2)},
	{src: `arr[0] = 9; params.get('arr')[0]`, env: MapEnv{"arr": []int64{1}}, want: int64(1)},
	{src: `foo`, env: MapEnv{"foo": struct{}{}}, errKind: KindType, errHas: "param foo"},
	{src: `foo`, env: MapEnv{"foo": []any{1, "a"}}, errKind: KindType, errHas: "mixed"},
	{src: `params`, errKind: KindType, errHas: "params cannot be used as a value"},
	{src: `params = 1`, errKind: KindType, errHas: "read-only"},
	{src: `params['x'] = 1`, errKind: KindType, errHas: "read-only"},
	{src: `params.get(1)`, errKind: KindType},
	{src: `params.getFromStep('a', 'b')`, errKind: KindType, errHas: "params.getFromStep (not registered)"},
	{src: `getFromSignal('a', 'b')`, errKind: KindType, errHas: "not registered"},
	{src: `params.get('when').getYear()`, env: MapEnv{"when": time.Date(2020, 5, 6, 0, 0, 0, 0, time.UTC)}, want: int64(2020)},
}

func TestParams(t *testing.T) { t.Parallel(); run(t, paramCases) }

func TestNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		src  string
		want []string
	}{
		{`foo * 2 + bar`, []string{"bar", "foo"}},
		{`x = 1; x + y`, []string{"y"}},
		{`params.get('a') + params['b'] + params.get(c)`, []string{"a", "b", "c"}},
		{`int i = 0; i`, []string{}},
		{`Math.max(a, 1)`, []string{"a"}},
		{`x = x + 1`, []string{"x"}},
		{`x += 1`, []string{"x"}},
		{`for (int i = 0; i < n; i++) {} i`, []string{"n"}},
		{`params.getFromStep('s', 'p')`, []string{}},
		{`s.length()`, []string{"s"}},
		{`Util.dateIntsBetween(start, end, 1)`, []string{"end", "start"}},
		{`a + a + a`, []string{"a"}},
		{`return y; y = 2;`, []string{"y"}},
		{`params.containsKey('opt') ? params.get('opt') : 'd'`, []string{"opt"}},
		{`new DateTime().withZone(DateTimeZone.forID(tz))`, []string{"tz"}},
	}
	for _, c := range cases {
		p, err := Compile(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if got := p.Names(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Names(%s) = %v, want %v", c.src, got, c.want)
		}
	}
}

func TestExtensionFunctions(t *testing.T) {
	t.Parallel()
	errStep := errors.New("step not found")
	var gotCtx context.Context
	fns := map[string]Func{
		"params.getFromStep": func(ctx context.Context, args []any) (any, error) {
			gotCtx = ctx
			if args[0] == "missing" {
				return nil, errStep
			}
			return fmt.Sprintf("%v.%v", args[0], args[1]), nil
		},
		"getFromSignal": func(_ context.Context, args []any) (any, error) { return len(args), nil },
		"params.when": func(_ context.Context, args []any) (any, error) {
			t, ok := args[0].(time.Time)
			if !ok {
				return nil, fmt.Errorf("want a time.Time, got %T", args[0])
			}
			return t.Year(), nil
		},
		"params.panics": func(context.Context, []any) (any, error) { panic("boom") },
		"params.failNow": func(context.Context, []any) (any, error) {
			return nil, &Error{Kind: KindUserThrow, Message: "signal not ready"}
		},
		"Util.custom":   func(_ context.Context, args []any) (any, error) { return args[0].(int64) * 10, nil },
		"params.badOut": func(context.Context, []any) (any, error) { return struct{}{}, nil },
	}
	cases := []evalCase{
		{src: `params.getFromStep('step1', 'x')`, want: "step1.x"},
		{src: `getFromSignal('sig', 'p', 3)`, want: int64(3)},
		{src: `params.when(new DateTime(0))`, want: int64(1970)},
		{src: `Util.custom(4)`, want: int64(40)},
		{src: `params.getFromStep('missing', 'x')`, errKind: KindRuntime, errHas: "step not found"},
		{src: `params.panics()`, errKind: KindRuntime, errHas: "panicked"},
		{src: `params.failNow()`, errKind: KindUserThrow, errHas: "signal not ready"},
		{src: `params.badOut()`, errKind: KindType},
	}
	for i := range cases {
		cases[i].opts = []Option{WithFunctions(fns)}
	}
	for _, tc := range cases {
		checkCase(t, tc)
	}
	if gotCtx == nil {
		t.Fatal("extension function did not receive the context")
	}
	_, err := evalSrc(`params.getFromStep('missing', 'x')`, nil, WithFunctions(fns))
	if !errors.Is(err, errStep) {
		t.Fatalf("errors.Is(err, errStep) = false for %v", err)
	}
}

func TestMapEnvAndNilEnv(t *testing.T) {
	t.Parallel()
	p, err := Compile(`foo == null ? "none" : foo`)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []Env{nil, MapEnv{}, MapEnv{"foo": "bar"}} {
		v, err := p.Eval(context.Background(), env)
		if err != nil {
			t.Fatal(err)
		}
		if s := v.(string); s != "none" && s != "bar" {
			t.Fatalf("got %q", s)
		}
	}
	var noCtx context.Context // Eval treats a nil context as Background
	if v, err := p.Eval(noCtx, nil); err != nil || v != "none" {
		t.Fatalf("nil context: %v, %v", v, err)
	}
}

func TestEvalDoesNotMutateEnv(t *testing.T) {
	t.Parallel()
	arr := []int64{1, 2}
	m := map[string]any{"k": "v"}
	_, err := evalSrc(`arr[0] = 5; m.put("k", "changed"); m.put("n", 1); 0`, MapEnv{"arr": arr, "m": m})
	if err != nil {
		t.Fatal(err)
	}
	if arr[0] != 1 || m["k"] != "v" || len(m) != 1 {
		t.Fatalf("env mutated: %v %v", arr, m)
	}
}

func TestResultTypesAreGo(t *testing.T) {
	t.Parallel()
	v, err := evalSrc(`Map m = new HashMap(); m.put("s", new String[]{"a"}); m.put("d", new double[]{1.5}); m.put("b", new boolean[]{true}); m.put("l", 3); m.put("x", 2.5); m.put("n", null); m`, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"s": []string{"a"}, "d": []float64{1.5}, "b": []bool{true}, "l": int64(3), "x": 2.5, "n": nil}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("got %#v", v)
	}
	out, err := MarshalResult(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); got != `{"b":[true],"d":[1.5],"l":3,"n":null,"s":["a"],"x":2.5}` {
		t.Fatalf("MarshalResult = %s", got)
	}
	for in, want := range map[string]string{`2.0`: `2.0`, `1e10`: `1.0E10`, `0.0/0`: `"NaN"`, `"a\"b"`: `"a\"b"`, `new long[]{1,2}`: `[1,2]`, `null`: `null`} {
		v, err := evalSrc(in, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := MarshalResult(v)
		if err != nil || string(out) != want {
			t.Errorf("MarshalResult(%s) = %s, %v; want %s", in, out, err, want)
		}
	}
	if _, err := MarshalResult(struct{}{}); err == nil || !strings.Contains(err.Error(), "cannot encode") {
		t.Fatalf("want an encode error, got %v", err)
	}
}
