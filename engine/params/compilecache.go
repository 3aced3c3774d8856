package params

import (
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/maestro-aws/maestro/sel"
)

// Params' expressions and validators are compiled once per text and kept.
// A SEL program binds the functions it was compiled with, and a step's
// functions are bound to its evaluation (params.getFromStep over the
// attempt's upstream, a subworkflow's or foreach's outputs): compiled
// with them, a program would be good for one attempt only, and a step's
// expressions used to be parsed and checked again for every attempt.
// So a program is compiled against stand-ins instead (boundFunc), one per
// function name, which call the function of that name the evaluation
// carries in its context (withFuncs). A program then serves every
// evaluation whose functions have the same names, and is kept by its text
// and those names (funcSet.key).

type compiledKey struct {
	expr  string
	funcs string // funcSet.key
}

// compiled holds the programs kept (keptLimit bounds them).
var compiled keptMap[compiledKey, *sel.Program]

// funcSet is the functions of one evaluation: the functions themselves,
// carried in its context, and the stand-ins its programs are compiled
// with.
type funcSet struct {
	funcs map[string]sel.Func
	// key names the functions: their names sorted, joined by NUL; ""
	// for none.
	key string
	// bound are the stand-ins by name (boundFunc), shared by every set
	// of the same names; for a static set (staticFuncSet), the functions
	// themselves.
	bound  map[string]sel.Func
	static bool
}

// namedSet is what every funcSet of the same names shares: its key and
// stand-ins.
type namedSet struct {
	key   string
	bound map[string]sel.Func
}

// namedSets holds a namedSet for each set of names, by the sum of its
// names' hashes (namesHash): found without building the key, which an
// attempt's evaluation would otherwise allocate. The names are the
// engine's own (params.getFromStep, the signal functions, ...), so the
// sets are few.
var namedSets sync.Map // uint64 -> *namedSet

var namesSeed = maphash.MakeSeed()

// namesHash hashes the names of funcs, whatever their order.
func namesHash(funcs map[string]sel.Func) uint64 {
	var h uint64
	for n := range funcs {
		h += maphash.String(namesSeed, n)
	}
	return h
}

func newFuncSet(funcs map[string]sel.Func) funcSet {
	if len(funcs) == 0 {
		return funcSet{}
	}
	h := namesHash(funcs)
	if v, ok := namedSets.Load(h); ok {
		if ns := v.(*namedSet); ns.sameNames(funcs) {
			return funcSet{funcs: funcs, key: ns.key, bound: ns.bound}
		}
	}
	names := slices.Sorted(maps.Keys(funcs))
	ns := &namedSet{key: strings.Join(names, "\x00"), bound: make(map[string]sel.Func, len(names))}
	for _, n := range names {
		ns.bound[n] = boundFunc(n)
	}
	// Another set of names with the same hash keeps its place (the
	// slow path above serves this one).
	if v, loaded := namedSets.LoadOrStore(h, ns); loaded && v.(*namedSet).sameNames(funcs) {
		ns = v.(*namedSet)
	}
	return funcSet{funcs: funcs, key: ns.key, bound: ns.bound}
}

// sameNames reports whether funcs has exactly the set's names.
func (ns *namedSet) sameNames(funcs map[string]sel.Func) bool {
	if len(ns.bound) != len(funcs) {
		return false
	}
	for n := range funcs {
		if _, ok := ns.bound[n]; !ok {
			return false
		}
	}
	return true
}

// workflowSet is the funcSet of a run's workflow params (workflowFuncs),
// signalledSet that of a run a signal starts (with SignalFuncs), each
// built once. Their functions are the package's own and read the run
// from the context already: programs are compiled with them bound, and
// kept apart from those compiled against stand-ins of the same names
// (the key's "static" prefix), so an evaluation with them needs nothing
// more in its context.
var (
	workflowSet  = sync.OnceValue(func() *funcSet { return staticFuncSet(workflowFuncs) })
	signalledSet = sync.OnceValue(func() *funcSet {
		funcs := maps.Clone(workflowFuncs)
		maps.Copy(funcs, SignalFuncs)
		return staticFuncSet(funcs)
	})
)

// staticFuncSet is the funcSet of functions that are the same for every
// evaluation, compiled in as they are.
func staticFuncSet(funcs map[string]sel.Func) *funcSet {
	names := slices.Sorted(maps.Keys(funcs))
	return &funcSet{funcs: funcs, key: "static\x00" + strings.Join(names, "\x00"), bound: funcs, static: true}
}

// funcsKey carries an evaluation's functions (funcSet.funcs) in its
// context.
type funcsKey struct{}

// withFuncs is ctx carrying the functions of fs for the programs it runs.
func withFuncs(ctx context.Context, fs funcSet) context.Context {
	if fs.key == "" || fs.static {
		return ctx
	}
	return context.WithValue(ctx, funcsKey{}, fs.funcs)
}

// boundFunc is the stand-in for the function name: it calls the function
// of that name in the evaluation's context.
func boundFunc(name string) sel.Func {
	return func(ctx context.Context, args []any) (any, error) {
		funcs, _ := ctx.Value(funcsKey{}).(map[string]sel.Func)
		f := funcs[name]
		if f == nil {
			return nil, fmt.Errorf("%s is not available here", name)
		}
		return f(ctx, args)
	}
}

// compileOptions are the options compiling against fs's stand-ins.
func compileOptions(fs funcSet) []sel.Option {
	if fs.key == "" {
		return nil
	}
	return []sel.Option{sel.WithFunctions(fs.bound)}
}

// compileExpression compiles expr against the functions of fs, or returns
// the program kept for the same text and function names.
func compileExpression(expr string, fs funcSet) (*sel.Program, error) {
	k := compiledKey{expr, fs.key}
	if prog, ok := compiled.get(k); ok {
		return prog, nil
	}
	prog, err := sel.Compile(expr, compileOptions(fs)...)
	if err != nil {
		return nil, err
	}
	compiled.put(k, prog)
	return prog, nil
}

// Compile compiles an expression that calls no functions of an
// evaluation (a while step's condition, an Http step's state
// expression), or returns the program kept for its text: each iteration
// and attempt that evaluates it again shares one program.
func Compile(expr string) (*sel.Program, error) {
	return compileExpression(expr, funcSet{})
}
