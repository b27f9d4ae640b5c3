package docs

import (
	"regexp"
	"strings"
	"testing"
)

// e2eMarker is the form of the comments test/e2e/docblocks_test.go reads before a ```sh block
// of a page whose commands the e2e tests run (user-guide.md, backup.md): the same pattern as its
// markerRe.
var e2eMarker = regexp.MustCompile(`^<!-- e2e: (skip: .+|piped to .+) -->$`)

// A misspelt marker would otherwise be found only by the e2e test that runs its section, and a
// marker before anything but a ```sh block would mark nothing.
func TestE2EMarkersMarkShBlocks(t *testing.T) {
	for _, p := range userPages(t) {
		lines := strings.Split(p.text, "\n")
		for i, line := range lines {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "<!-- e2e:") {
				continue
			}
			if !e2eMarker.MatchString(line) {
				t.Errorf("%s:%d: %q is neither <!-- e2e: skip: WHY --> nor <!-- e2e: piped to COMMAND -->", p.name, i+1, line)
				continue
			}
			next := ""
			for _, l := range lines[i+1:] {
				if next = strings.TrimSpace(l); next != "" {
					break
				}
			}
			if next != "```sh" {
				t.Errorf("%s:%d: the e2e marker is followed by %q, not a ```sh block", p.name, i+1, next)
			}
		}
	}
}
