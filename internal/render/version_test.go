package render

import (
	"testing"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// Pods carry the release of spec.slurmVersion; a cluster stored without the field renders no
// label at all, so that an operator upgrade does not change (and roll) its pod templates.
func TestSlurmVersionLabel(t *testing.T) {
	for _, v := range []string{"", "24.11", "26.05"} {
		sc := full()
		sc.Spec.SlurmVersion = v
		n := clusternames.For(sc, "")
		c, err := RenderConfig(sc, ConfigInputs{Names: n})
		if err != nil {
			t.Fatal(err)
		}
		for name, l := range map[string]map[string]string{
			"controller": ControllerStatefulSet(sc, n, c).Spec.Template.Labels,
			"restapi":    RestAPIDeployment(sc, n, c).Spec.Template.Labels,
			"login":      LoginStatefulSet(sc, n, c).Spec.Template.Labels,
			"accounting": AccountingStatefulSet(sc, n, c, "h").Spec.Template.Labels,
			"database":   DatabaseStatefulSet(sc, n).Spec.Template.Labels,
		} {
			got, ok := l[wellknown.LabelSlurmVersion]
			if got != v || ok != (v != "") {
				t.Errorf("slurmVersion %q: %s template label %q (present %v)", v, name, got, ok)
			}
		}
		if sel := ControllerStatefulSet(sc, n, c).Spec.Selector.MatchLabels; sel[wellknown.LabelSlurmVersion] != "" {
			t.Errorf("the selector holds the release (selectors are immutable): %v", sel)
		}
	}
}
