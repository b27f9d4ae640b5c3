package charts

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// alertRule is what the charts' tests read of an alerting rule.
type alertRule struct {
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// alertRules reads the alerting rules of a rule file by name.
func alertRules(t *testing.T, path string) map[string]*alertRule {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				alertRule
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	out := map[string]*alertRule{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = &r.alertRule
		}
	}
	return out
}
