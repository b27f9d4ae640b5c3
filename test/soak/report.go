package soak

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// KV is one figure of a bench line.
type KV struct {
	Name  string
	Value string
}

// Table is one markdown table of the report.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
}

// Report is what the soak prints at the end: `bench:` lines (one per topic, for scripts),
// markdown tables (for docs/soak.md), the bounds it judged and what broke them.
type Report struct {
	Bench    [][]KV
	Tables   []Table
	Checks   []Check
	Notes    []string
	Warnings []string
}

// Check is one bound of issue 14's "Show" and whether the run kept it.
type Check struct {
	Bound  string
	Value  string
	OK     bool
	Judged bool // false: reported only (e.g. growth in a run shorter than 20 minutes)
}

// Failed lists the judged checks that failed.
func (r *Report) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Judged && !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// Write prints the report: bench lines first, then the tables and the checks in markdown.
func (r *Report) Write(w io.Writer) {
	for _, line := range r.Bench {
		parts := make([]string, 0, len(line))
		for _, kv := range line {
			parts = append(parts, kv.Name+"="+kv.Value)
		}
		fmt.Fprintf(w, "bench: %s\n", strings.Join(parts, " "))
	}
	fmt.Fprintln(w)
	for _, t := range r.Tables {
		writeTable(w, t)
	}
	writeTable(w, r.checkTable())
	for _, n := range r.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintf(w, "\nRepeated warnings and errors in the components' logs:\n\n")
		for _, n := range r.Warnings {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

func (r *Report) checkTable() Table {
	t := Table{Title: "Bounds (issue 14, Show)", Header: []string{"bound", "value", "result"}}
	for _, c := range r.Checks {
		res := "ok"
		switch {
		case !c.Judged:
			res = "not judged"
		case !c.OK:
			res = "**FAILED**"
		}
		t.Rows = append(t.Rows, []string{c.Bound, c.Value, res})
	}
	return t
}

func writeTable(w io.Writer, t Table) {
	fmt.Fprintf(w, "%s\n\n", t.Title)
	fmt.Fprintf(w, "| %s |\n", strings.Join(t.Header, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(t.Header)))
	for _, r := range t.Rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	fmt.Fprintln(w)
}

// Num formats a figure for a bench line: integers plainly, others with 3 significant digits,
// NaN as "n/a".
func Num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// MiB formats bytes as MiB with one decimal.
func MiB(b float64) string {
	if math.IsNaN(b) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", b/(1<<20))
}

var digits = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)
var hexes = regexp.MustCompile(`\b[0-9a-f]{8,}\b`)

// LogShape reduces a log line to its shape, so that repeats of one message with different
// numbers, times and ids count as one: digits become #, long hex ids become <id>.
func LogShape(line string) string {
	line = hexes.ReplaceAllString(line, "<id>")
	line = digits.ReplaceAllString(line, "#")
	if len(line) > 220 {
		line = line[:220] + "…"
	}
	return line
}

// Repeated returns the shapes that occur at least min times among lines, most frequent first.
func Repeated(lines []string, min int) []struct {
	Shape string
	N     int
} {
	counts := map[string]int{}
	for _, l := range lines {
		counts[LogShape(l)]++
	}
	type sn = struct {
		Shape string
		N     int
	}
	var out []sn
	for s, n := range counts {
		if n >= min {
			out = append(out, sn{s, n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Shape < out[j].Shape
	})
	return out
}

// medianOf is the median of vs, NaN when empty.
func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[len(vs)/2]
}
