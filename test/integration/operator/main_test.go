//go:build integration

package operator

import (
	"os"
	"testing"

	sunkwebhook "sunk.dev/sunk/internal/webhook"
)

// TestMain lets this test binary serve as the webhook's Lua sandbox, as sunk-operator does.
func TestMain(m *testing.M) {
	sunkwebhook.ServeLuaSandbox()
	os.Exit(m.Run())
}
