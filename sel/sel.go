// Package sel implements SEL, the Simple, Secure and Safe expression language
// in which Maestro users write parameter values, conditions and foreach
// ranges.
//
// SEL is the subset of Java that Maestro's SEL accepts: typed local
// variables, arithmetic with Java semantics, strings, one-dimensional
// arrays, Map, if/for/while, `throw "message"`, the String, Math, Long,
// Double and UUID methods users rely on, a Joda-Time style date API and the
// Util date helpers. Integers are always 64-bit (`int` is an alias of
// `long`), exactly as in Maestro.
//
// A program is compiled once (lexer → parser → static checks) and evaluated
// many times, concurrently:
//
//	prog, err := sel.Compile(`foo * 2 + 1`)
//	...
//	v, err := prog.Eval(ctx, sel.MapEnv{"foo": int64(41)}) // v == int64(83)
//
// Evaluation is bounded by Limits (loop iterations, array and string
// lengths, visited nodes, allocated bytes) and by the context; breaking one
// is an ordinary *Error with a position, never a crash or a hang. Programs
// cannot reach anything outside the language: there is no reflection, file,
// network, environment or process access.
package sel

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"time"
	"unicode/utf8"
)

// Env resolves free names: bare identifiers that the expression reads
// without declaring them, and the keys of params.get('x') and params['x'].
// Values use the Go representation described on Program.Eval; int, int32,
// float32, json.Number, map[string]string and []any are normalised.
type Env interface {
	Lookup(name string) (any, bool)
}

// MapEnv is an Env backed by a map.
type MapEnv map[string]any

// Lookup returns m[name].
func (m MapEnv) Lookup(name string) (any, bool) {
	v, ok := m[name]
	return v, ok
}

// Func is an extension function registered with WithFunctions. Arguments
// arrive in the Go representation of Program.Eval (a DateTime as a
// time.Time); the result is normalised like an Env value. An error fails the
// evaluation with KindRuntime at the call, wrapping the error.
type Func func(ctx context.Context, args []any) (any, error)

// Option configures Compile.
type Option func(*config)

type config struct {
	limits Limits
	funcs  map[string]Func
	clock  func() time.Time
}

// WithLimits sets the limits checked while compiling and evaluating. Zero
// fields take the defaults.
func WithLimits(l Limits) Option {
	return func(c *config) { c.limits = l.withDefaults() }
}

// WithFunctions registers extension functions. A key "recv.method" (for
// example "params.getFromStep") makes recv.method(...) call the function; a
// key without a dot (for example "getFromSignal") is callable as a bare
// function. Calls to params, Util or bare functions that are not registered
// compile, and fail when evaluated.
func WithFunctions(fns map[string]Func) Option {
	return func(c *config) {
		if c.funcs == nil {
			c.funcs = make(map[string]Func, len(fns))
		}
		for k, f := range fns {
			c.funcs[k] = f
		}
	}
}

// WithClock sets the clock behind new DateTime(), System.currentTimeMillis()
// and the Util timeout helpers (time.Now by default); tests use it to pin
// the current time.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.clock = now }
}

// Program is a compiled expression. It is immutable and safe for concurrent
// use by multiple goroutines.
type Program struct {
	src       string
	body      []stmt
	nslots    int
	slotNames []string
	names     []string
	limits    Limits
	clock     func() time.Time
}

func (p *Program) now() time.Time {
	if p.clock != nil {
		return p.clock()
	}
	return time.Now()
}

// Compile parses src and runs the static checks (names, classes, methods,
// types named in declarations, break/continue placement, limits). The error,
// if any, is an *Error.
func Compile(src string, opts ...Option) (*Program, error) {
	cfg := config{limits: DefaultLimits()}
	for _, o := range opts {
		o(&cfg)
	}
	if n := utf8.RuneCountInString(src); n >= cfg.limits.MaxSourceLength {
		return nil, newError(src, 0, KindLimit, nil,
			"expression length %d is over the limit %d", n, cfg.limits.MaxSourceLength)
	}
	body, perr := parse(src, cfg.limits)
	if perr != nil {
		return nil, perr
	}
	c := newChecker(src, cfg.funcs)
	if cerr := c.check(body); cerr != nil {
		return nil, cerr
	}
	names := make([]string, 0, len(c.names))
	for n := range c.names {
		names = append(names, n)
	}
	sort.Strings(names)
	return &Program{
		src:       src,
		body:      body,
		nslots:    len(c.slotNames),
		slotNames: c.slotNames,
		names:     names,
		limits:    cfg.limits,
		clock:     cfg.clock,
	}, nil
}

// Source returns the expression text.
func (p *Program) Source() string { return p.src }

// Names returns the free names the expression reads, sorted and without
// duplicates: bare identifiers read before any assignment or declaration,
// and the literal keys of params.get('x') and params['x']. Maestro orders
// parameter evaluation by it.
func (p *Program) Names() []string {
	out := make([]string, len(p.names))
	copy(out, p.names)
	return out
}

// Eval runs the program. Free names are resolved through env (which may be
// nil). The result is the value of the executed `return`, else of the last
// top-level expression statement, else nil. Results and env values map to Go
// as: long (and int) → int64, double → float64, boolean → bool, String →
// string, null → nil, String[] → []string, long[] → []int64, double[] →
// []float64, boolean[] → []bool, Map → map[string]any. Any error is an
// *Error.
func (p *Program) Eval(ctx context.Context, env Env) (result any, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	st := newState(ctx, p, env)
	defer st.releasePool()
	defer func() {
		if r := recover(); r != nil {
			result = nil
			if sp, ok := r.(selPanic); ok {
				err = sp.err
				return
			}
			err = newError(p.src, st.lastPos, KindRuntime, fmt.Errorf("panic: %v\n%s", r, debug.Stack()),
				"internal error: %v", r)
		}
	}()
	if cerr := ctx.Err(); cerr != nil {
		st.failCause(0, KindLimit, cerr, "evaluation cancelled: %v", cerr)
	}
	v, vpos, ok := st.run(p.body)
	if !ok {
		return nil, nil
	}
	out, cerr := toGo(v, true)
	if cerr != nil {
		return nil, newError(p.src, vpos, KindType, cerr, "%v", cerr)
	}
	return out, nil
}
