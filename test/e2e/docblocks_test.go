//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"sunk.dev/sunk/test/testenv"
)

// A docs page's commands are run as the page shows them: the fenced ```sh blocks of one of its
// sections, in order, each with bash (set -euo pipefail) in the repository root. An HTML
// comment on the line before a block tells the test what else to do with it:
//
//	<!-- e2e: skip: WHY -->          not run (an interactive shell, a variable the test sets itself)
//	<!-- e2e: piped to COMMAND -->   run by COMMAND, the block on its standard input: the block
//	                                 is typed into a shell COMMAND opens (kubectl exec ... bash)

// docBlock is one ```sh block of a page.
type docBlock struct {
	page   string
	line   int // of its opening fence, for messages
	script string
	skip   string // why it is not run; empty: run
	pipeTo string // the command that reads the block, or empty
}

var markerRe = regexp.MustCompile(`^<!-- e2e: (skip: .+|piped to .+) -->$`)

// docSection returns the ```sh blocks under the heading (a whole line, "## 2. Install sunk") of
// page (relative to the repository root), up to the next heading of its level or above. A
// section without one, or an e2e comment the test does not know, fails the test: the docs
// changed under it.
func docSection(t *testing.T, page, heading string) []docBlock {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), page))
	if err != nil {
		t.Fatal(err)
	}
	level := strings.Index(heading, " ")
	var (
		blocks           []docBlock
		in, fenced       bool
		indent, previous string
		cur              *docBlock
		body             []string
	)
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case fenced && trimmed == "```":
			fenced = false
			if cur != nil {
				cur.script = strings.Join(body, "\n") + "\n"
				blocks = append(blocks, *cur)
				cur = nil
			}
		case fenced:
			body = append(body, strings.TrimPrefix(line, indent))
		case strings.HasPrefix(trimmed, "```"):
			fenced = true
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
			if in && trimmed == "```sh" {
				cur, body = &docBlock{page: page, line: n}, nil
				if m := markerRe.FindStringSubmatch(previous); m != nil {
					if s, ok := strings.CutPrefix(m[1], "skip: "); ok {
						cur.skip = s
					} else {
						cur.pipeTo = strings.TrimPrefix(m[1], "piped to ")
					}
				} else if strings.HasPrefix(previous, "<!-- e2e:") {
					t.Fatalf("%s:%d: unknown e2e comment %q", page, n-1, previous)
				}
			}
		case line == heading:
			in = true
		case in && strings.HasPrefix(line, "#"):
			if l := strings.Index(line, " "); l > 0 && l <= level && strings.Trim(line[:l], "#") == "" {
				in = false
			}
		}
		if trimmed != "" {
			previous = trimmed
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("%s: no ```sh block under %q", page, heading)
	}
	return blocks
}

// docRun is how the test runs a page's commands on the local cluster: the environment the
// commands read (KUBECONFIG, the variables a skipped block would have set) and the names the
// test uses instead of the page's, so that it can run beside other checkouts' tests.
type docRun struct {
	env   []string
	names []docName
}

// docName replaces what re matches with with (regexp.ReplaceAllString).
type docName struct {
	re   *regexp.Regexp
	with string
}

// text is s with the test's names.
func (r docRun) text(s string) string {
	for _, n := range r.names {
		s = n.re.ReplaceAllString(s, n.with)
	}
	return s
}

// run runs the blocks in order, skipping the marked ones, and fails the test with the output
// of the first that fails; it logs what each ran and printed.
func (r docRun) run(t *testing.T, blocks ...docBlock) {
	t.Helper()
	for _, b := range blocks {
		if b.skip != "" {
			t.Logf("%s:%d: not run: %s", b.page, b.line, b.skip)
			continue
		}
		script := "set -euo pipefail\n" + r.text(b.script)
		if b.pipeTo != "" {
			script = fmt.Sprintf("set -euo pipefail\n%s <<'E2E_DOC_BLOCK'\nset -euo pipefail\n%sE2E_DOC_BLOCK\n", r.text(b.pipeTo), r.text(b.script))
		}
		start := time.Now()
		out, err := r.bash(script)
		t.Logf("%s:%d ran in %s:\n%s%s", b.page, b.line, time.Since(start).Round(100*time.Millisecond), script, indentLines(out))
		if err != nil {
			t.Fatalf("%s:%d: %v", b.page, b.line, err)
		}
	}
}

// docBlockTimeout bounds one block: the longest waits in the docs (a cluster turning Ready, a
// drain) take minutes on the local cluster, and a block that hangs must not hold the whole run.
const docBlockTimeout = 8 * time.Minute

// bash runs script in the repository root and returns its output (stdout and stderr).
func (r docRun) bash(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), docBlockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), r.env...)
	// A timeout kills bash and what it started (kubectl wait, helm), not bash alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// indentLines sets command output apart from the script in the test's log.
func indentLines(s string) string {
	if s == "" {
		return ""
	}
	return "  | " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  | ") + "\n"
}
