package docs

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// fieldSpanRe is a code span that starts with a field path of a SlurmCluster or NodeSet:
// `spec.controller.extraConf`, `spec.partitions[1].topology: Unsupported value ...`,
// `NodeSet.spec.replicas`. What follows the path (a value, an error) is not read.
var fieldSpanRe = regexp.MustCompile(`^(?:(SlurmCluster|NodeSet)\.)?((?:spec|status)(?:\.[A-Za-z][A-Za-z0-9]*|\[[^\]]*\])+)`)

// kindBeforeRe is a kind named just before a code span: SlurmCluster `spec.x`, the
// NodeSet's `spec.x`.
var kindBeforeRe = regexp.MustCompile(`\b(SlurmCluster|NodeSet)(?:'s)?\s*\(?$`)

// goFileRe is a Go file's name, which fieldSpanRe would read as a path (`spec.go`, `status.go`).
var goFileRe = regexp.MustCompile(`^[a-z_]+\.go$`)

// notOurs are fields of other kinds that the docs name as `spec.…` and that neither CRD has: a
// Pod's node and scheduler, a scheduler-plugins PodGroup's size.
var notOurs = map[string]bool{"spec.nodeName": true, "spec.schedulerName": true, "spec.minMember": true}

// TestDocsNameOnlyCRDFields: every SlurmCluster or NodeSet field the docs name exists in the
// generated CRDs (config/crd/bases). Two places name fields:
//
//   - code spans that start with `spec.` or `status.`. An array element is `[]`, `[0]`, `[i]`
//     or `[*]`. A path passes when either kind has it, unless the doc names the kind: as a
//     prefix (`SlurmCluster.spec.preemption`) or just before the span (SlurmCluster
//     `spec.imagePullSecrets`, the NodeSet's `spec.gpuType`); then that kind must have it.
//   - YAML blocks: a whole object (`apiVersion: sunk.dev/v1alpha1`, `kind: SlurmCluster`) is
//     checked key by key against its kind (metadata excepted), a block of a lone `spec:` against
//     either kind. Blocks that start indented (a fragment continuing the one before) are not read.
//
// A field under a map (labels, resources' limits) or one that keeps unknown fields takes any key.
func TestDocsNameOnlyCRDFields(t *testing.T) {
	kinds := crdSchemas(t)
	for _, p := range userPages(t) {
		for _, s := range spans(p.text) {
			if goFileRe.MatchString(s.code) {
				continue
			}
			m := fieldSpanRe.FindStringSubmatch(s.code)
			if m == nil || notOurs[m[2]] {
				continue
			}
			kind := m[1]
			if k := kindBeforeRe.FindStringSubmatch(s.before); kind == "" && k != nil {
				kind = k[1]
			}
			if err := lookupIn(kinds, kind, fieldPath(m[2])); err != nil {
				t.Errorf("%s:%d: `%s`: %v", p.name, s.line, m[0], err)
			}
		}
		for _, f := range fences(p.text) {
			if f.lang != "yaml" || strings.HasPrefix(f.body, " ") {
				continue
			}
			for i, doc := range strings.Split(f.body, "\n---\n") {
				var obj map[string]any
				if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
					continue // not a map: a list, a fragment
				}
				kind, _ := obj["kind"].(string)
				switch {
				case obj["apiVersion"] == "sunk.dev/v1alpha1":
					delete(obj, "metadata")
				case len(obj) == 1 && obj["spec"] != nil:
				default:
					continue
				}
				delete(obj, "apiVersion")
				delete(obj, "kind")
				var paths [][]string
				keyPaths(obj, nil, &paths)
				for _, path := range paths {
					if err := lookupIn(kinds, kind, path); err != nil {
						t.Errorf("%s:%d: YAML block (document %d): %s: %v", p.name, f.line, i+1, strings.Join(path, "."), err)
					}
				}
			}
		}
	}
}

// lookupIn checks path in the named kind, or, without one, in any kind.
func lookupIn(kinds map[string]*schema, kind string, path []string) error {
	if kind != "" {
		s := kinds[kind]
		if s == nil {
			return fmt.Errorf("no CRD of kind %s", kind)
		}
		if err := s.lookup(path); err != nil {
			return fmt.Errorf("%s: %v", kind, err)
		}
		return nil
	}
	var errs []string
	for _, k := range sortedKeys(kinds) {
		err := kinds[k].lookup(path)
		if err == nil {
			return nil
		}
		errs = append(errs, k+": "+err.Error())
	}
	return fmt.Errorf("in no kind (%s)", strings.Join(errs, "; "))
}
