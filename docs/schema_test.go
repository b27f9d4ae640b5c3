package docs

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// schema is the part of a CRD's OpenAPI v3 schema that says which field paths exist.
type schema struct {
	Type                 string             `json:"type"`
	Properties           map[string]*schema `json:"properties"`
	Items                *schema            `json:"items"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	PreserveUnknown      bool               `json:"x-kubernetes-preserve-unknown-fields"`
}

// crdSchemas are the generated CRDs' schemas by kind (SlurmCluster, NodeSet), read from
// config/crd/bases, of which the sunk chart's crds/ is a copy (charts' tests keep it one).
func crdSchemas(t *testing.T) map[string]*schema {
	t.Helper()
	files, err := filepath.Glob("../config/crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	out := map[string]*schema{}
	for _, f := range files {
		var crd struct {
			Spec struct {
				Names    struct{ Kind string }
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema *schema `json:"openAPIV3Schema"`
					}
				}
			}
		}
		if err := yaml.Unmarshal([]byte(read(t, f)), &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema.OpenAPIV3Schema == nil {
			t.Fatalf("%s: want one version with a schema", f)
		}
		out[crd.Spec.Names.Kind] = crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	}
	return out
}

// fieldPath splits a documented path into field names and "[]" for an array element:
// "spec.partitions[1].topology", "spec.partitions[].topology", "spec.prolog[i].name" and
// "spec.partitions[*].topology" all name the same field.
func fieldPath(p string) []string {
	var out []string
	for _, part := range strings.Split(p, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, name)
		}
		for ; rest != ""; _, rest, _ = strings.Cut(rest, "[") {
			out = append(out, "[]")
		}
	}
	return out
}

// lookup follows path from s. A map (additionalProperties) takes any key, and a field that
// keeps unknown fields takes any path below it.
func (s *schema) lookup(path []string) error {
	at := "the root"
	for i, seg := range path {
		switch {
		case s.PreserveUnknown:
			return nil
		case seg == "[]":
			if s.Type != "array" || s.Items == nil {
				return fmt.Errorf("%s is not a list", at)
			}
			s = s.Items
		case s.Properties[seg] != nil:
			s = s.Properties[seg]
		case len(s.AdditionalProperties) > 0 && string(s.AdditionalProperties) != "false":
			var v schema
			if json.Unmarshal(s.AdditionalProperties, &v) != nil {
				return nil // additionalProperties: true
			}
			s = &v
		default:
			return fmt.Errorf("%s has no field %q", at, seg)
		}
		at = strings.Join(path[:i+1], ".")
	}
	return nil
}

// keyPaths are the paths of every key of a decoded YAML document, lists as "[]": the
// leaves and the maps and lists on the way (lookup of each must pass).
func keyPaths(v any, prefix []string, out *[][]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			p := append(append([]string{}, prefix...), k)
			*out = append(*out, p)
			keyPaths(e, p, out)
		}
	case []any:
		for _, e := range v {
			keyPaths(e, append(append([]string{}, prefix...), "[]"), out)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
