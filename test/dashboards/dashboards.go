// Package dashboards reads the Grafana dashboards the sunk chart ships
// (charts/sunk/files/dashboards/*.json) for the tests that check them: every PromQL expression
// of their panels and variables, and the metric names an expression reads. It depends on the
// standard library only; the PromQL itself is parsed by Prometheus (test/integration/prometheus).
package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Dir is the dashboards' directory relative to the repository's root.
const Dir = "charts/sunk/files/dashboards"

// Dashboard is the part of a Grafana dashboard the tests read.
type Dashboard struct {
	File       string `json:"-"`
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
	Panels []Panel `json:"panels"`
}

// Variable is a dashboard variable; a query variable's Query is Grafana's
// {"query": "label_values(...)"}.
type Variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"`
}

// Panel is one panel; rows have no targets.
type Panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// Query is one PromQL expression of a dashboard, with where it sits.
type Query struct {
	Dashboard, Panel, RefID string
	Expr                    string
}

func (q Query) String() string {
	return fmt.Sprintf("%s / %q / %s: %s", q.Dashboard, q.Panel, q.RefID, q.Expr)
}

// Load reads every *.json of dir, strictly: unknown fields are allowed (Grafana has many),
// malformed JSON is not.
func Load(dir string) ([]Dashboard, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no dashboards in %s", dir)
	}
	var out []Dashboard
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d Dashboard
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		d.File = filepath.Base(f)
		out = append(out, d)
	}
	return out, nil
}

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// Queries returns every PromQL expression of d: its panels' targets, and the metric
// expression of each label_values(EXPR, label) variable (reported as panel "$name").
func (d Dashboard) Queries() ([]Query, error) {
	var out []Query
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			return nil, fmt.Errorf("%s: variable %s: %w", d.File, v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			return nil, fmt.Errorf("%s: variable %s: %q is not label_values(EXPR, label)", d.File, v.Name, q.Query)
		}
		out = append(out, Query{Dashboard: d.File, Panel: "$" + v.Name, RefID: "query", Expr: strings.TrimSpace(m[1])})
	}
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, Query{Dashboard: d.File, Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
		}
	}
	return out, nil
}

// Expand replaces the dashboard variables of expr that the dashboards use: $cluster (every
// cluster) and $__rate_interval.
func Expand(expr, rateInterval string) string {
	return strings.NewReplacer("$__rate_interval", rateInterval, "$cluster", ".+").Replace(expr)
}

// keywords of PromQL that look like names but are none.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"inf": true, "nan": true,
}

// labelLists are the keywords followed by a parenthesised list of label names.
var labelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// MetricNames returns the metric names expr reads, sorted: the names of its vector
// selectors. It is a scanner, not a parser: it skips strings, label matchers {…}, ranges […]
// and label lists (by (…), on (…), …), takes a name followed by "(" for a function, and
// fails on unbalanced brackets or an unterminated string. Prometheus parses the expressions
// for real in test/integration/prometheus.
func MetricNames(expr string) ([]string, error) {
	names := map[string]bool{}
	var stack []byte
	closing := map[byte]byte{'(': ')', '{': '}', '[': ']'}
	skipString := func(i int) (int, error) { // i at the opening quote; returns the index after the closing one
		q := expr[i]
		for j := i + 1; j < len(expr); j++ {
			switch {
			case expr[j] == '\\' && q != '`':
				j++
			case expr[j] == q:
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d in %q", i, expr)
	}
	// skipTo returns the index after the bracket that closes the one at i, stepping over strings.
	skipTo := func(i int) (int, error) {
		open, end := expr[i], closing[expr[i]]
		depth := 0
		for j := i; j < len(expr); {
			switch c := expr[j]; {
			case c == '"' || c == '\'' || c == '`':
				k, err := skipString(j)
				if err != nil {
					return 0, err
				}
				j = k
				continue
			case c == open:
				depth++
			case c == end:
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
			j++
		}
		return 0, fmt.Errorf("unbalanced %c at %d in %q", open, i, expr)
	}
	nextNonSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n') {
			i++
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '{' || c == '[':
			j, err := skipTo(i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '(':
			stack = append(stack, c)
			i++
		case c == ')':
			if len(stack) == 0 {
				return nil, fmt.Errorf("unbalanced ) at %d in %q", i, expr)
			}
			stack = stack[:len(stack)-1]
			i++
		case c == '}' || c == ']':
			return nil, fmt.Errorf("unbalanced %c at %d in %q", c, i, expr)
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isNameChar(expr[i]) || expr[i] == '.') {
				i++ // a number or a duration
			}
		case c == '$' || isNameStart(c):
			j := i + 1
			for j < len(expr) && isNameChar(expr[j]) {
				j++
			}
			word := expr[i:j]
			next := nextNonSpace(j)
			switch lower := strings.ToLower(word); {
			case c == '$':
				return nil, fmt.Errorf("dashboard variable %s outside a string or range in %q", word, expr)
			case labelLists[lower]:
				if next < len(expr) && expr[next] == '(' {
					k, err := skipTo(next)
					if err != nil {
						return nil, err
					}
					j = k
				}
			case keywords[lower]:
			case next < len(expr) && expr[next] == '(':
				// a function or an aggregation
			case labelLists[followingWord(expr, next)]:
				// an aggregation with its labels first: sum by (a) (…)
			default:
				names[word] = true
			}
			i = j
		default:
			i++
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("unbalanced ( in %q", expr)
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// followingWord returns the name that starts at i, in lower case ("" if none does).
func followingWord(expr string, i int) string {
	j := i
	for j < len(expr) && isNameChar(expr[j]) {
		j++
	}
	return strings.ToLower(expr[i:j])
}

func isNameStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isNameChar(c byte) bool { return isNameStart(c) || c >= '0' && c <= '9' }
