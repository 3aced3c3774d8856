package flow_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/maestro-aws/maestro/engine/dbtest"
)

// Every actor, timer goroutine and worker must be gone once the engines
// the tests started have stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, dbtest.LeakOptions()...)
}
