//go:build integration

package operator

import (
	"os"
	"testing"

	"sunk.dev/sunk/internal/validation"
)

// TestMain lets this test binary serve as validation's Lua sandbox, as sunk-operator does.
func TestMain(m *testing.M) {
	validation.ServeLuaSandbox()
	os.Exit(m.Run())
}
