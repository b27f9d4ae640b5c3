package clusternames

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

func TestLoginUserNames(t *testing.T) {
	n := For(&sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Name: "research", Namespace: "slurm"}}, "")
	seen := map[string]string{}
	for _, tc := range []struct{ user, want string }{
		{"ada", "research-login-users-ada"},
		{"grace-h", "research-login-users-grace-h"},
		{"Ada", "research-login-users-ada-"},               // hashed: differs from "ada"
		{"john.smith", "research-login-users-john-smith-"}, // hashed
		{"__", "research-login-users-"},                    // nothing left but the hash
		{strings.Repeat("x", 80), "research-login-users-" + strings.Repeat("x", 22) + "-"},
	} {
		got := n.LoginUser("users", tc.user)
		if !strings.HasPrefix(got, tc.want) || (!strings.HasSuffix(tc.want, "-") && got != tc.want) {
			t.Errorf("LoginUser(users, %q) = %q, want %q...", tc.user, got, tc.want)
		}
		if len(got) > maxLoginUserName {
			t.Errorf("LoginUser(users, %q) = %q: %d characters, more than %d", tc.user, got, len(got), maxLoginUserName)
		}
		if errs := validation.IsDNS1123Label(got); errs != nil {
			t.Errorf("LoginUser(users, %q) = %q: not a DNS label: %v", tc.user, got, errs)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("users %q and %q share the name %q", other, tc.user, got)
		}
		seen[got] = tc.user
	}
}
