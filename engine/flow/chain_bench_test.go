package flow_test

import (
	"testing"

	"github.com/maestro-aws/maestro/engine/flow"
)

// BenchmarkChainCommits: one 100-step NoOp chain at a time; what a chained
// step costs against the floor of a durable commit measured in the same
// run (issue 28: commit-ratio <= 1.5), and how many commits it takes
// (flowtest.Env.ChainFigures).
func BenchmarkChainCommits(b *testing.B) {
	const steps = 100
	e := newEnv(b)
	e.engine(flow.Config{})
	e.push(chainJSON("chain", steps))
	e.ChainFigures(b, "chain", steps)
}
