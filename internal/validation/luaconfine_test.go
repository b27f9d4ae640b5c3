package validation

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// confineProbeEnv makes this test binary, re-executed, confine itself as the sandbox does and
// then try what a script that escaped the Lua environment would.
const confineProbeEnv = "SUNK_TEST_CONFINE_PROBE"

// TestSandboxConfinement: after confineSandbox a process can read no file, not even one it
// could read before (a stand-in for the ServiceAccount token), and reach no TCP port, while a
// process without it can do both. Where the kernel has no Landlock there is nothing to show,
// and the test says so by failing: the machines sunk is tested on have it.
func TestSandboxConfinement(t *testing.T) {
	if path := os.Getenv(confineProbeEnv); path != "" {
		confineProbe(path)
		return
	}
	if v, err := llsyscall.LandlockGetABIVersion(); err != nil || v < 4 {
		t.Fatalf("this kernel's Landlock ABI is %d (%v); the test needs 4 or later (files and TCP)", v, err)
	}
	secret := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secret, []byte("operator-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	probe := func(confine string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSandboxConfinement$")
		cmd.Env = []string{confineProbeEnv + "=" + secret, "PROBE_ADDR=" + l.Addr().String(), "PROBE_CONFINE=" + confine}
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	if out := probe("no"); !strings.Contains(out, "read: operator-token") || !strings.Contains(out, "connect: ok") {
		t.Fatalf("without confinement the probe should read the file and connect:\n%s", out)
	}
	out := probe("yes")
	if !strings.Contains(out, "read: open "+secret+": permission denied") || !strings.Contains(out, "connect: dial tcp") {
		t.Fatalf("confined, the probe read or connected:\n%s", out)
	}
	t.Logf("confined probe: %s", strings.Join(strings.Fields(strings.SplitN(out, "\nPASS", 2)[0]), " "))
}

// confineProbe runs in the re-executed test binary.
func confineProbe(path string) {
	if os.Getenv("PROBE_CONFINE") == "yes" {
		if err := confineSandbox(); err != nil {
			println("confine:", err.Error())
			os.Exit(1)
		}
	}
	if b, err := os.ReadFile(path); err != nil {
		println("read:", err.Error())
	} else {
		println("read:", string(b))
	}
	if c, err := net.Dial("tcp", os.Getenv("PROBE_ADDR")); err != nil {
		println("connect:", err.Error())
	} else {
		c.Close()
		println("connect: ok")
	}
}
