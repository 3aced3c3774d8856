package alert_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every forwarder, stream and timer goroutine must be gone once the tests
// that started them have ended.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
