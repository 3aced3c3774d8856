package params

import (
	"context"
	"fmt"
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

// compiledLimit bounds the programs kept; past it the cache starts again.
const compiledLimit = 2048

type compiledKey struct {
	expr  string
	funcs string // funcSet.key
}

var compiled = struct {
	mu    sync.RWMutex
	progs map[compiledKey]*sel.Program
}{progs: map[compiledKey]*sel.Program{}}

// funcSet is the functions of one evaluation: the functions themselves,
// carried in its context, and the stand-ins its programs are compiled
// with.
type funcSet struct {
	funcs map[string]sel.Func
	// key names the functions: their names sorted, joined by NUL; ""
	// for none.
	key string
	// bound are the stand-ins by name (boundFunc), shared by every set
	// of the same names.
	bound map[string]sel.Func
}

// boundSets holds the stand-ins of each set of names. The names are the
// engine's own (params.getFromStep, the signal functions, ...), so the
// sets are few.
var boundSets sync.Map // key -> map[string]sel.Func

func newFuncSet(funcs map[string]sel.Func) funcSet {
	if len(funcs) == 0 {
		return funcSet{}
	}
	names := slices.Sorted(maps.Keys(funcs))
	key := strings.Join(names, "\x00")
	bound, ok := boundSets.Load(key)
	if !ok {
		b := make(map[string]sel.Func, len(names))
		for _, n := range names {
			b[n] = boundFunc(n)
		}
		bound, _ = boundSets.LoadOrStore(key, b)
	}
	return funcSet{funcs: funcs, key: key, bound: bound.(map[string]sel.Func)}
}

// workflowSet is the funcSet of a run's workflow params (workflowFuncs),
// signalledSet that of a run a signal starts (with SignalFuncs), each
// built once.
var (
	workflowSet  = sync.OnceValue(func() funcSet { return newFuncSet(workflowFuncs) })
	signalledSet = sync.OnceValue(func() funcSet {
		funcs := maps.Clone(workflowFuncs)
		maps.Copy(funcs, SignalFuncs)
		return newFuncSet(funcs)
	})
)

// funcsKey carries an evaluation's functions (funcSet.funcs) in its
// context.
type funcsKey struct{}

// withFuncs is ctx carrying the functions of fs for the programs it runs.
func withFuncs(ctx context.Context, fs funcSet) context.Context {
	if fs.key == "" {
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
	compiled.mu.RLock()
	prog := compiled.progs[k]
	compiled.mu.RUnlock()
	if prog != nil {
		return prog, nil
	}
	prog, err := sel.Compile(expr, compileOptions(fs)...)
	if err != nil {
		return nil, err
	}
	compiled.mu.Lock()
	if len(compiled.progs) >= compiledLimit {
		clear(compiled.progs)
	}
	compiled.progs[k] = prog
	compiled.mu.Unlock()
	return prog, nil
}

// Compile compiles an expression that calls no functions of an
// evaluation (a while step's condition, an Http step's state
// expression), or returns the program kept for its text: each iteration
// and attempt that evaluates it again shares one program.
func Compile(expr string) (*sel.Program, error) {
	return compileExpression(expr, funcSet{})
}
