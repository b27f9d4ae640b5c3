package docs

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// chartNames are the charts under charts/.
var chartNames = []string{"sunk", "slurm"}

// passthrough are the slurm chart's values that its templates copy whole (toYaml) into a
// SlurmCluster or NodeSet field: below them a value path is that field's path. nodeSets[] is
// a whole NodeSet spec (but `name`, its metadata.name, which the example element has).
var passthrough = map[string]struct{ kind, field string }{
	"slurm:imagePullSecrets":             {"SlurmCluster", "spec.imagePullSecrets"},
	"slurm:controller.resources":         {"SlurmCluster", "spec.controller.resources"},
	"slurm:controller.unsafeConfKeys":    {"SlurmCluster", "spec.controller.unsafeConfKeys"},
	"slurm:restApi.resources":            {"SlurmCluster", "spec.restApi.resources"},
	"slurm:accounting.resources":         {"SlurmCluster", "spec.accounting.resources"},
	"slurm:accounting.databaseResources": {"SlurmCluster", "spec.accounting.databaseResources"},
	"slurm:accounting.external":          {"SlurmCluster", "spec.accounting.external"},
	"slurm:login.resources":              {"SlurmCluster", "spec.login.resources"},
	"slurm:login.services":               {"SlurmCluster", "spec.login.services"},
	"slurm:login.sidecars":               {"SlurmCluster", "spec.login.sidecars"},
	"slurm:preemption":                   {"SlurmCluster", "spec.preemption"},
	"slurm:topology":                     {"SlurmCluster", "spec.topology"},
	"slurm:partitions":                   {"SlurmCluster", "spec.partitions"},
	"slurm:schedulerPolicy":              {"SlurmCluster", "spec.schedulerPolicy"},
	"slurm:prolog":                       {"SlurmCluster", "spec.prolog"},
	"slurm:epilog":                       {"SlurmCluster", "spec.epilog"},
	"slurm:nodeSets[]":                   {"NodeSet", "spec"},
}

// templateKeys are keys of a list's elements that the chart's templates read but the list's
// example element in values.yaml leaves out (its file, for TestValueTablesAreTrue to find them).
var templateKeys = map[string]struct {
	keys     []string
	template string
}{
	"slurm:sharedVolumes[]": {[]string{"claimName"}, "slurm/templates/slurmcluster.yaml"},
}

// components are the sunk chart's Deployments, which a README row names as `<component>.x`.
var components = []string{"operator", "syncer", "scheduler"}

// chartValues is a chart's values.yaml, decoded.
func chartValues(t *testing.T, chart string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal([]byte(read(t, "../charts/"+chart+"/values.yaml")), &v); err != nil {
		t.Fatalf("charts/%s/values.yaml: %v", chart, err)
	}
	return v
}

// valuePath splits a value path as `helm --set` reads it: dots separate keys unless escaped
// (`operator.slurmImages.26\.05` is the key "26.05" of the map operator.slurmImages), and
// `[n]` is an element of a list ("[]").
func valuePath(p string) []string {
	var out []string
	var key strings.Builder
	flush := func() {
		if key.Len() > 0 {
			out = append(out, key.String())
			key.Reset()
		}
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\' && i+1 < len(p):
			i++
			key.WriteByte(p[i])
		case c == '.':
			flush()
		case c == '[':
			flush()
			if j := strings.IndexByte(p[i:], ']'); j > 0 {
				i += j
			}
			out = append(out, "[]")
		default:
			key.WriteByte(c)
		}
	}
	flush()
	return out
}

// checkValue says whether path names a value of chart. A key must be in values.yaml, with
// these exceptions, each where values.yaml's own key ends:
//
//   - A list element ([n], any n) is checked against the list's first (example) element, plus
//     the keys the templates read that the example leaves out (templateKeys).
//   - Below a passthrough value (preemption, partitions, nodeSets[] ...) the path is the CRD
//     field's path, checked against the CRD's schema.
//   - Below an empty map or list ({}, []: labels, annotations, nodeSelector, tolerations ...)
//     any key is the user's own.
func checkValue(kinds map[string]*schema, values map[string]any, chart string, path []string) error {
	var node any = values
	for i, seg := range path {
		at := strings.Join(path[:i], ".")
		canon := strings.ReplaceAll(at, ".[]", "[]")
		var next any
		found := false
		switch n := node.(type) {
		case map[string]any:
			if seg != "[]" {
				next, found = n[seg]
			}
		case []any:
			if seg == "[]" && len(n) > 0 {
				next, found = n[0], true
			}
		}
		if found {
			node = next
			continue
		}
		for j := i; j > 0; j-- {
			prefix := strings.ReplaceAll(strings.Join(path[:j], "."), ".[]", "[]")
			if pt, ok := passthrough[chart+":"+prefix]; ok {
				rest := append(fieldPath(pt.field), path[j:]...)
				if err := kinds[pt.kind].lookup(rest); err != nil {
					return fmt.Errorf("%s is %s %s, where %v", prefix, pt.kind, pt.field, err)
				}
				return nil
			}
		}
		if tk, ok := templateKeys[chart+":"+canon]; ok && i == len(path)-1 {
			for _, k := range tk.keys {
				if k == seg {
					return nil
				}
			}
		}
		switch n := node.(type) {
		case map[string]any:
			if len(n) == 0 {
				return nil
			}
		case []any:
			if len(n) == 0 {
				return nil
			}
		}
		if at == "" {
			at = "values.yaml"
		}
		return fmt.Errorf("%s has no %q", at, seg)
	}
	return nil
}

// checkValueIn checks path in the named chart, or in either when chart is "".
func checkValueIn(kinds map[string]*schema, values map[string]map[string]any, chart string, path []string) error {
	charts := chartNames
	if chart != "" {
		charts = []string{chart}
	}
	var errs []string
	for _, c := range charts {
		err := checkValue(kinds, values[c], c, path)
		if err == nil {
			return nil
		}
		errs = append(errs, "charts/"+c+": "+err.Error())
	}
	return fmt.Errorf("%s", strings.Join(errs, "; "))
}

// setRe is a --set argument: 'quoted', "quoted" or bare.
var setRe = regexp.MustCompile(`--set(?:-string)?[ =](?:'([^']*)'|"([^"]*)"|(\S+))`)

// chartOf is the chart a command names (charts/sunk, charts/slurm), "" when it names neither
// or both.
func chartOf(command string) string {
	sunk, slurm := strings.Contains(command, "charts/sunk"), strings.Contains(command, "charts/slurm")
	switch {
	case sunk && !slurm:
		return "sunk"
	case slurm && !sunk:
		return "slurm"
	}
	return ""
}

// commands are a page's shell commands: the logical lines of its shell blocks (a line ending
// in `\` continues on the next) and its code spans.
func commands(p page) []struct {
	text string
	line int
} {
	var out []struct {
		text string
		line int
	}
	for _, f := range fences(p.text) {
		if f.lang != "sh" && f.lang != "bash" && f.lang != "" {
			continue
		}
		var cmd string
		start := 0
		for i, l := range strings.Split(f.body, "\n") {
			if cmd == "" {
				start = f.line + 1 + i
			}
			if strings.HasSuffix(l, `\`) {
				cmd += strings.TrimSuffix(l, `\`) + " "
				continue
			}
			out = append(out, struct {
				text string
				line int
			}{cmd + l, start})
			cmd = ""
		}
	}
	for _, s := range spans(p.text) {
		out = append(out, struct {
			text string
			line int
		}{s.code, s.line})
	}
	return out
}

// setPaths are the value paths of a --set argument: comma-separated path=value pairs (`\,`
// escapes a comma); a pair without "=" (`...`) is no path.
func setPaths(arg string) []string {
	var out []string
	for _, pair := range regexp.MustCompile(`(?:[^,\\]|\\.)+`).FindAllString(arg, -1) {
		if path, _, ok := strings.Cut(pair, "="); ok {
			out = append(out, path)
		}
	}
	return out
}

// chartSpanRe is a code span the prose says is a chart's value: the sunk chart's
// `operator.slurmImages`, the slurm chart's `controller.nodeWatcher`, the value `topology`.
var chartSpanRe = regexp.MustCompile(`(?:\b(sunk|slurm) chart's|\bthe value)\s*$`)

// valuePathRe is the value path a code span starts with (`operator.slurmConfigCheck: true`).
var valuePathRe = regexp.MustCompile(`^(?:[A-Za-z0-9_-]|\\.|\.|\[[^\]]*\])+`)

// notValues are the top-level keys of YAML blocks that are Kubernetes objects or parts of
// one, never a chart's values.
var notValues = []string{"apiVersion", "kind", "metadata", "spec"}

// TestDocsNameOnlyChartValues: every chart value the docs name exists in its chart. The docs
// name values in
//
//   - --set arguments of shell blocks and code spans. The chart is the one the command names
//     (charts/sunk or charts/slurm); a command that names neither (`helm upgrade sunk
//     --reuse-values --set ...`) passes when either chart has the value.
//   - YAML blocks that are values files (-f): blocks that start unindented with a map whose
//     keys are not an object's (apiVersion, kind, metadata, spec). Every key must be a value
//     of one chart, the same for the whole block.
//   - Code spans right after "the sunk chart's", "the slurm chart's" (that chart) or "the
//     value" (either).
//   - The value tables of charts/*/README.md (TestValueTablesAreTrue).
//
// What a path into a list, a map or a value the chart copies into a SlurmCluster or NodeSet
// may name: checkValue.
func TestDocsNameOnlyChartValues(t *testing.T) {
	kinds := crdSchemas(t)
	values := map[string]map[string]any{}
	for _, c := range chartNames {
		values[c] = chartValues(t, c)
	}
	for _, p := range userPages(t) {
		for _, c := range commands(p) {
			for _, m := range setRe.FindAllStringSubmatch(c.text, -1) {
				for _, path := range setPaths(m[1] + m[2] + m[3]) {
					if err := checkValueIn(kinds, values, chartOf(c.text), valuePath(path)); err != nil {
						t.Errorf("%s:%d: --set %s: %v", p.name, c.line, path, err)
					}
				}
			}
		}
		for _, s := range spans(p.text) {
			m := chartSpanRe.FindStringSubmatch(s.before)
			if m == nil {
				continue
			}
			path := valuePathRe.FindString(s.code)
			if err := checkValueIn(kinds, values, m[1], valuePath(path)); err != nil {
				t.Errorf("%s:%d: `%s`: %v", p.name, s.line, s.code, err)
			}
		}
		for _, f := range fences(p.text) {
			if f.lang != "yaml" || strings.HasPrefix(f.body, " ") {
				continue
			}
			var snippet map[string]any
			if yaml.Unmarshal([]byte(f.body), &snippet) != nil || len(snippet) == 0 {
				continue
			}
			object := false
			for _, k := range notValues {
				object = object || snippet[k] != nil
			}
			if object {
				continue
			}
			var paths [][]string
			keyPaths(snippet, nil, &paths)
			var errs []string
			for _, c := range chartNames {
				var bad []string
				seen := map[string]bool{}
				for _, path := range paths {
					if err := checkValue(kinds, values[c], c, path); err != nil && !seen[err.Error()] {
						seen[err.Error()] = true
						bad = append(bad, err.Error())
					}
				}
				sort.Strings(bad)
				if len(bad) == 0 {
					errs = nil
					break
				}
				errs = append(errs, fmt.Sprintf("charts/%s: %s", c, strings.Join(bad, ", ")))
			}
			if errs != nil {
				t.Errorf("%s:%d: YAML block of values (the keys of no chart's values.yaml; an object needs apiVersion and kind): %s",
					p.name, f.line, strings.Join(errs, "; "))
			}
		}
	}
}
