package docs

import (
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// page is one Markdown file a user reads: the README, a chart's README or a page under docs/.
type page struct {
	name string // relative to the repository, for messages
	text string
}

// userPages are the pages the value, field and key checks read.
func userPages(t *testing.T) []page {
	t.Helper()
	names, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	charts, err := filepath.Glob("../charts/*/README.md")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var out []page
	for _, n := range names {
		out = append(out, page{"docs/" + n, read(t, n)})
	}
	for _, n := range append([]string{"../README.md"}, charts...) {
		out = append(out, page{strings.TrimPrefix(filepath.ToSlash(n), "../"), read(t, n)})
	}
	return out
}

// fence is one fenced code block of a page.
type fence struct {
	lang string
	body string
	line int // of the opening fence, 1-based
}

var fenceRe = regexp.MustCompile("(?m)^```([a-z]*)\n((?s:.*?))^```")

func fences(text string) []fence {
	var out []fence
	for _, m := range fenceRe.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, fence{
			lang: text[m[2]:m[3]],
			body: text[m[4]:m[5]],
			line: strings.Count(text[:m[0]], "\n") + 1,
		})
	}
	return out
}

// prose is the page without its fenced blocks (replaced by blank lines, so line numbers hold).
func prose(text string) string {
	return fenceRe.ReplaceAllStringFunc(text, func(f string) string {
		return strings.Repeat("\n", strings.Count(f, "\n"))
	})
}

// span is one `code span` of a page's prose.
type span struct {
	code   string
	before string // the text on its line before the opening backtick
	line   int
}

var spanRe = regexp.MustCompile("`([^`\n]+)`")

func spans(text string) []span {
	var out []span
	for i, l := range strings.Split(prose(text), "\n") {
		for _, m := range spanRe.FindAllStringSubmatchIndex(l, -1) {
			out = append(out, span{code: l[m[2]:m[3]], before: l[:m[0]], line: i + 1})
		}
	}
	return out
}
