//go:build integration

package charts

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// rbacAllowList is every permission the charts may grant, one line per ServiceAccount, scope
// and resource, each under a comment that says why it is needed.
const rbacAllowList = "testdata/rbac-allowlist.txt"

// rbacRenders are the renders whose grants the allow-list covers: both charts with their
// default values, and the values the end-to-end tests and the demo install with (the sunk
// chart's defaults, plus the scheduler for one SlurmCluster; the slurm chart's full example).
var rbacRenders = [][]string{
	{"template", "sunk", "sunk", "-n", "sunk-system"},
	{"template", "sunk", "sunk", "-n", "sunk-system", "--set", "scheduler.enabled=true",
		"--set", "scheduler.cluster.name=c1", "--set", "scheduler.cluster.namespace=slurm"},
	{"template", "sunk", "sunk", "-n", "sunk-system", "--api-versions", "monitoring.coreos.com/v1"},
	{"template", "demo", "slurm", "-n", "slurm"},
	{"template", "research", "slurm", "-n", "research", "-f", "testdata/slurm-full.values.yaml"},
}

// grant is one verb a ServiceAccount holds on one resource, cluster-wide or in one namespace.
// A binding to a role the charts do not render (system:kube-scheduler) is one grant with
// verb "bound" and resource "ClusterRole:<name>" or "Role:<name>".
type grant struct {
	subject  string // namespace/name of the ServiceAccount
	scope    string // "cluster" or "ns:<namespace>"
	resource string // apiGroup/resource (core: "/pods"), with ":name,..." when resourceNames limit it
	verb     string
}

func (g grant) line() string { return g.subject + " " + g.scope + " " + g.resource + " " + g.verb }

// TestRBACAllowList renders the charts and compares every permission their Roles,
// ClusterRoles and bindings give a ServiceAccount with testdata/rbac-allowlist.txt: a new
// verb, resource or a namespaced grant turned cluster-wide fails until the allow-list, read
// by a reviewer, says why; a line no render grants any more fails as stale.
func TestRBACAllowList(t *testing.T) {
	allowed, err := readAllowList(rbacAllowList)
	if err != nil {
		t.Fatal(err)
	}
	rendered := map[grant]bool{}
	for _, args := range rbacRenders {
		out, err := helm(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		gs, err := grantsOf(out)
		if err != nil {
			t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
		}
		for _, g := range gs {
			rendered[g] = true
		}
	}
	var extra, stale []string
	for g := range rendered {
		if !allowed[g] {
			extra = append(extra, g.line())
		}
	}
	for g := range allowed {
		if !rendered[g] {
			stale = append(stale, g.line())
		}
	}
	sort.Strings(extra)
	sort.Strings(stale)
	if len(extra) > 0 {
		t.Errorf("the charts grant what %s does not allow (add each with a comment saying why, or take it away):\n%s",
			rbacAllowList, strings.Join(extra, "\n"))
	}
	if len(stale) > 0 {
		t.Errorf("%s allows what no render grants any more (remove it):\n%s", rbacAllowList, strings.Join(stale, "\n"))
	}
}

// TestNoClusterGrantBesideTheCluster: with the scheduler enabled for SlurmCluster slurm/c1, no
// ServiceAccount in the namespace slurm holds a cluster-wide grant. Whoever may create pods in
// a namespace may run them as any of its accounts, and the Slurm cluster's namespace is written
// by the people who run Slurm, not only by the platform's admins (docs/security.md).
func TestNoClusterGrantBesideTheCluster(t *testing.T) {
	out, err := helm(t, rbacRenders[1]...)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := grantsOf(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if strings.HasPrefix(g.subject, "slurm/") && g.scope == "cluster" {
			t.Errorf("%s, in the SlurmCluster's namespace, holds %s %s cluster-wide", g.subject, g.verb, g.resource)
		}
	}
}

// grantsOf expands the bindings of one render into grants.
func grantsOf(manifests string) ([]grant, error) {
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	roles := map[string][]rbacv1.PolicyRule{} // namespace/name
	var clusterBindings []rbacv1.ClusterRoleBinding
	var bindings []rbacv1.RoleBinding
	for _, doc := range strings.Split(manifests, "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, err
		}
		var err error
		switch head.Kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err = yaml.UnmarshalStrict([]byte(doc), &r); err == nil {
				if r.AggregationRule != nil {
					return nil, fmt.Errorf("ClusterRole %s aggregates other roles: its grants cannot be read from the chart", r.Name)
				}
				clusterRoles[r.Name] = r.Rules
			}
		case "Role":
			var r rbacv1.Role
			if err = yaml.UnmarshalStrict([]byte(doc), &r); err == nil {
				roles[r.Namespace+"/"+r.Name] = r.Rules
			}
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err = yaml.UnmarshalStrict([]byte(doc), &b); err == nil {
				clusterBindings = append(clusterBindings, b)
			}
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err = yaml.UnmarshalStrict([]byte(doc), &b); err == nil {
				bindings = append(bindings, b)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s does not decode: %w\n%s", head.Kind, err, doc)
		}
	}

	var out []grant
	expand := func(subjects []rbacv1.Subject, bindingNS, scope string, ref rbacv1.RoleRef) error {
		var rules []rbacv1.PolicyRule
		var ok bool
		switch ref.Kind {
		case "ClusterRole":
			rules, ok = clusterRoles[ref.Name]
		case "Role":
			rules, ok = roles[bindingNS+"/"+ref.Name]
		}
		for _, s := range subjects {
			if s.Kind != rbacv1.ServiceAccountKind {
				return fmt.Errorf("a binding to %s names a %s (%s): the charts bind only their ServiceAccounts", ref.Name, s.Kind, s.Name)
			}
			subject := s.Namespace + "/" + s.Name
			if !ok {
				out = append(out, grant{subject, scope, ref.Kind + ":" + ref.Name, "bound"})
				continue
			}
			for _, r := range rules {
				for _, u := range r.NonResourceURLs {
					for _, v := range r.Verbs {
						out = append(out, grant{subject, scope, "url:" + u, v})
					}
				}
				for _, group := range r.APIGroups {
					for _, res := range r.Resources {
						resource := group + "/" + res
						if len(r.ResourceNames) > 0 {
							names := slices.Clone(r.ResourceNames)
							sort.Strings(names)
							resource += ":" + strings.Join(names, ",")
						}
						for _, v := range r.Verbs {
							out = append(out, grant{subject, scope, resource, v})
						}
					}
				}
			}
		}
		return nil
	}
	for _, b := range clusterBindings {
		if err := expand(b.Subjects, "", "cluster", b.RoleRef); err != nil {
			return nil, err
		}
	}
	for _, b := range bindings {
		if err := expand(b.Subjects, b.Namespace, "ns:"+b.Namespace, b.RoleRef); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readAllowList reads lines "SUBJECT SCOPE RESOURCE VERB[,VERB...]"; each must come right
// under a comment that says why it is needed.
func readAllowList(path string) (map[grant]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	allowed := map[grant]bool{}
	commented := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "#"):
			commented = true
			continue
		case line == "":
			commented = false
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 {
			return nil, fmt.Errorf("%s:%d: want SUBJECT SCOPE RESOURCE VERBS, got %q", path, n, line)
		}
		if !commented {
			return nil, fmt.Errorf("%s:%d: %q has no comment above it saying why it is needed", path, n, line)
		}
		for _, v := range strings.Split(fields[3], ",") {
			g := grant{fields[0], fields[1], fields[2], v}
			if allowed[g] {
				return nil, fmt.Errorf("%s:%d: %s is listed twice", path, n, g.line())
			}
			allowed[g] = true
		}
		commented = false
	}
	return allowed, sc.Err()
}
