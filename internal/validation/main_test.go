package validation

import (
	"os"
	"testing"
)

// TestMain lets this test binary serve as its own Lua sandbox, as the operator does.
func TestMain(m *testing.M) {
	ServeLuaSandbox()
	os.Exit(m.Run())
}
