package params

import (
	"sync"

	"github.com/maestro-aws/maestro/sel"
)

// A run's workflow params were compiled anew at every start: a workflow's
// own expressions (a path built from RUN_DATE, a threshold) cost a parse
// and a check per run, about 10 % of evaluating them. Compiled with the
// workflow params' functions (workflowFuncs: they read the run from the
// context, nothing bound at compile time), a program is the same for
// every run, so it is kept by its text. A step's params are compiled with
// functions bound to their evaluation (params.getFromStep over the
// attempt's upstream) and are not kept.

// compiledLimit bounds the programs kept; past it the cache starts again.
const compiledLimit = 2048

var compiled = struct {
	mu    sync.RWMutex
	progs map[string]*sel.Program
}{progs: map[string]*sel.Program{}}

// compileExpression compiles expr with funcs; shared says funcs is
// workflowFuncs, whose programs are kept and given to every evaluation.
func compileExpression(expr string, funcs map[string]sel.Func, shared bool) (*sel.Program, error) {
	if shared {
		compiled.mu.RLock()
		prog := compiled.progs[expr]
		compiled.mu.RUnlock()
		if prog != nil {
			return prog, nil
		}
	}
	var opts []sel.Option
	if len(funcs) > 0 {
		opts = append(opts, sel.WithFunctions(funcs))
	}
	prog, err := sel.Compile(expr, opts...)
	if err != nil || !shared {
		return prog, err
	}
	compiled.mu.Lock()
	if len(compiled.progs) >= compiledLimit {
		clear(compiled.progs)
	}
	compiled.progs[expr] = prog
	compiled.mu.Unlock()
	return prog, nil
}
