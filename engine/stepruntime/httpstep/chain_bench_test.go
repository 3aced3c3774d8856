package httpstep_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/httpstep"
)

// BenchmarkHttpChain: one run at a time of a chain of 20 Http steps
// against a server that answers at once; what a side-effecting chained
// step costs in durable commits (issue 28: <= 2 per step) and against
// the commit floor (flowtest.Env.ChainFigures). Each step makes two
// writes it waits for before its request (STARTING, then RUNNING with
// the recorded intent) and one behind (its end).
func BenchmarkHttpChain(b *testing.B) {
	const steps = 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	b.Cleanup(srv.Close)
	env := flowtest.New(b)
	env.Engine(stepruntime.Registry{httpstep.Type: httpstep.New(httpstep.Config{})}, flow.Config{})
	var def strings.Builder
	def.WriteString(`{"workflow":{"id":"hchain","steps":[`)
	for i := range steps {
		if i > 0 {
			def.WriteString(",")
		}
		next := ""
		if i < steps-1 {
			next = fmt.Sprintf(`,"transition":{"successors":{"h%d":"true"}}`, i+1)
		}
		fmt.Fprintf(&def, `{"step":{"id":"h%d","type":"Http"%s,
		  "params":{"http":{"type":"MAP","value":{"url":{"type":"STRING","value":"%s/%d"}}}}}}`, i, next, srv.URL, i)
	}
	def.WriteString("]}}")
	env.Push(def.String())
	env.ChainFigures(b, "hchain", steps)
}
