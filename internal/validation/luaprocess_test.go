package validation

import (
	"crypto/sha256"
	"strings"
	"testing"
)

// TestLuaSandboxProcess: TestMain made this binary its own sandbox, as main does the
// operator; a verdict is cached per script, and without the sandbox the same checks run here.
func TestLuaSandboxProcess(t *testing.T) {
	if sandboxExe == "" {
		t.Fatal("ServeLuaSandbox did not enable the sandbox process")
	}
	bad := goodLua + "undefined_function()\n"
	for i := 0; i < 2; i++ {
		if err := ValidateJobSubmitLua(bad); err == nil || !strings.Contains(err.Error(), "top-level code fails") {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if _, ok := luaResults.Load(sha256.Sum256([]byte(bad))); !ok {
		t.Error("the verdict is not cached")
	}

	exe := sandboxExe
	sandboxExe = ""
	defer func() { sandboxExe = exe }()
	for src, want := range map[string]string{
		goodLua: "",
		bad:     "top-level code fails",
		goodLua + "local s = string.rep('x', 2^40)\n": "string.rep",
		goodLua + "while true do end\n":               "did not finish",
	} {
		err := ValidateJobSubmitLua(src)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("in this process, %q: %v, want %q", src, err, want)
		}
	}
}
