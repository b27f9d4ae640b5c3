package docs

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// valueRow is one row of a chart README's "## Values" table: the backticked paths of its first
// cell, and the defaults of its second when that cell is backticked values alone, one a path.
type valueRow struct {
	paths    []string
	defaults []string
	line     int
}

// valueTable is the rows of a chart README's "## Values" table that name values. `.tag` after
// `image.repository` is image.tag, and `<component>.x` is x of every Deployment of the sunk
// chart.
func valueTable(t *testing.T, readme string) []valueRow {
	t.Helper()
	start := strings.Index(readme, "\n## Values\n")
	if start < 0 {
		t.Fatal("no ## Values section")
	}
	base := strings.Count(readme[:start], "\n") + 2
	section := readme[start+1:]
	if end := strings.Index(section[3:], "\n## "); end > 0 {
		section = section[:end+3]
	}
	var rows []valueRow
	for i, l := range strings.Split(section, "\n") {
		cells := strings.Split(strings.ReplaceAll(l, `\|`, "\x00"), "|")
		if len(cells) < 4 || !strings.HasPrefix(l, "|") {
			continue
		}
		row := valueRow{line: base + i}
		prev := ""
		for _, m := range spanRe.FindAllStringSubmatch(cells[1], -1) {
			p := m[1]
			if strings.HasPrefix(p, ".") {
				parent := prev[:max(strings.LastIndex(prev, "."), 0)]
				p = parent + p
			}
			prev = p
			if rest, ok := strings.CutPrefix(p, "<component>."); ok {
				for _, c := range components {
					row.paths = append(row.paths, c+"."+rest)
				}
				continue
			}
			row.paths = append(row.paths, p)
		}
		if len(row.paths) == 0 {
			continue
		}
		if strings.Trim(spanRe.ReplaceAllString(cells[2], ""), " ,") == "" {
			for _, m := range spanRe.FindAllStringSubmatch(cells[2], -1) {
				row.defaults = append(row.defaults, m[1])
			}
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatal("the ## Values section has no table of backticked value paths")
	}
	return rows
}

// defaultText is a value of values.yaml as a README writes it: a scalar as it is, a list of
// scalars in flow style ([a, b]), an empty map {}; ok is false for what a row cannot quote.
func defaultText(v any) (string, bool) {
	switch v := v.(type) {
	case map[string]any:
		return "{}", len(v) == 0
	case []any:
		var items []string
		for _, e := range v {
			s, ok := defaultText(e)
			if !ok {
				return "", false
			}
			items = append(items, s)
		}
		return "[" + strings.Join(items, ", ") + "]", true
	case nil:
		return "", false
	}
	return fmt.Sprint(v), true
}

// valueAt is the value of values.yaml at a dotted path without lists.
func valueAt(values map[string]any, path string) (any, bool) {
	var v any = values
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// leaves are the value paths of values.yaml a README must cover: every key down to a value
// that is not a map with keys (a scalar, a list, {}).
func leaves(v any, prefix string, out *[]string) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		*out = append(*out, prefix)
		return
	}
	for k, e := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		leaves(e, p, out)
	}
}

// TestValueTablesAreTrue: every path the value table of charts/<chart>/README.md names is a
// value of the chart, with the default values.yaml gives it where the row quotes one per path
// (`operator.replicas` | `2`), and every value of its values.yaml is in the table, itself or a group
// above it (`controller.stateStorage` covers its size and storageClassName, and
// `operator.slurmImages` its releases).
func TestValueTablesAreTrue(t *testing.T) {
	kinds := crdSchemas(t)
	for _, chart := range chartNames {
		values := chartValues(t, chart)
		readme := read(t, "../charts/"+chart+"/README.md")
		named := map[string]bool{}
		for _, row := range valueTable(t, readme) {
			for i, p := range row.paths {
				named[p] = true
				if err := checkValue(kinds, values, chart, valuePath(p)); err != nil {
					t.Errorf("charts/%s/README.md:%d: `%s`: %v", chart, row.line, p, err)
					continue
				}
				if len(row.defaults) != len(row.paths) {
					continue
				}
				v, _ := valueAt(values, p)
				if want, ok := defaultText(v); ok && strings.Trim(row.defaults[i], `"`) != want {
					t.Errorf("charts/%s/README.md:%d: the default of `%s` is `%s`, values.yaml has %s", chart, row.line, p, row.defaults[i], want)
				}
			}
		}
		var all []string
		leaves(values, "", &all)
		sort.Strings(all)
		for _, leaf := range all {
			covered := false
			for p := leaf; p != "" && !covered; p = p[:max(strings.LastIndex(p, "."), 0)] {
				covered = named[p]
			}
			if !covered {
				t.Errorf("charts/%s/README.md: the value table does not name %s (nor a group above it)", chart, leaf)
			}
		}
	}
	for key, tk := range templateKeys {
		text := read(t, "../charts/"+tk.template)
		for _, k := range tk.keys {
			if !regexp.MustCompile(`\.` + k + `\b`).MatchString(text) {
				t.Errorf("templateKeys: %s does not read %s of %s", tk.template, k, key)
			}
		}
	}
}
