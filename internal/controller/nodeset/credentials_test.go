package nodeset

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCredentialsVerdict(t *testing.T) {
	dcj := corev1.SecretTypeDockerConfigJson
	for _, tc := range []struct {
		name  string
		found []secretState
		ok    bool
		want  []string
		not   []string
	}{
		{"all there", []secretState{{name: "nvcr", typ: dcj}, {name: "ghcr", typ: dcj}}, true,
			[]string{"nvcr, ghcr"}, nil},
		{"a typo", []secretState{{name: "nvcr", typ: dcj}, {name: "ncvr", missing: true}}, false,
			[]string{"Secret ncvr does not exist", "ContainerCreating"}, []string{"Secret nvcr"}},
		{"a wrong type", []secretState{{name: "opaque", typ: corev1.SecretTypeOpaque}}, false,
			[]string{`Secret opaque is of type "Opaque", not kubernetes.io/dockerconfigjson`}, nil},
		{"two wrong", []secretState{{name: "a", missing: true}, {name: "b", typ: corev1.SecretTypeDockercfg}}, false,
			[]string{"Secret a does not exist; Secret b is of type"}, nil},
	} {
		ok, msg := credentialsVerdict(tc.found)
		if ok != tc.ok {
			t.Errorf("%s: ok = %v, want %v (%s)", tc.name, ok, tc.ok, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message %q lacks %q", tc.name, msg, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(msg, n) {
				t.Errorf("%s: message %q names %q, which is fine", tc.name, msg, n)
			}
		}
	}
}
