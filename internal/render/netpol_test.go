package render

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

func TestNetworkPoliciesGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		sc   *sunkv1.SlurmCluster
	}{{"minimal", minimal()}, {"full", full()}} {
		n := clusternames.For(c.sc, "")
		var b strings.Builder
		for _, p := range NetworkPolicies(c.sc, n, "sunk-system") {
			out, err := yaml.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString("---\n")
			b.Write(out)
		}
		golden(t, c.name+".netpol.golden", b.String())
	}
}

// peer is a pod that connects: its namespace and labels.
type peer struct {
	namespace string
	labels    map[string]string
}

// admits evaluates policies as an enforcing network plugin does: a pod no policy selects takes
// everything; a selected pod takes what some rule of a selecting policy admits.
func admits(t *testing.T, policies []*networkingv1.NetworkPolicy, nsOf func(string) map[string]string, dstNS string, dst map[string]string, src peer, port int32) bool {
	t.Helper()
	sel := func(s *metav1.LabelSelector) k8slabels.Selector {
		out, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	selected := false
	for _, p := range policies {
		if p.Namespace != dstNS || !sel(&p.Spec.PodSelector).Matches(k8slabels.Set(dst)) {
			continue
		}
		selected = true
		for _, r := range p.Spec.Ingress {
			portOK := len(r.Ports) == 0
			for _, pp := range r.Ports {
				if ptr.Deref(pp.Protocol, corev1.ProtocolTCP) == corev1.ProtocolTCP && pp.Port.IntVal == port {
					portOK = true
				}
			}
			fromOK := len(r.From) == 0
			for _, f := range r.From {
				nsOK := src.namespace == dstNS
				if f.NamespaceSelector != nil {
					nsOK = sel(f.NamespaceSelector).Matches(k8slabels.Set(nsOf(src.namespace)))
				}
				podOK := f.PodSelector == nil || sel(f.PodSelector).Matches(k8slabels.Set(src.labels))
				if nsOK && podOK && (f.NamespaceSelector != nil || f.PodSelector != nil) {
					fromOK = true
				}
			}
			if portOK && fromOK {
				return true
			}
		}
	}
	return !selected
}

func TestNetworkPoliciesAdmitOnlySlurmAndSunk(t *testing.T) {
	sc := full() // managed accounting, node watcher, SSH
	sc.Spec.NetworkPolicy.Ingress = []networkingv1.NetworkPolicyIngressRule{{
		From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "monitoring"}}}},
		Ports: tcpPorts(9100),
	}}
	n := clusternames.For(sc, "")
	policies := NetworkPolicies(sc, n, "sunk-system")
	nsOf := func(ns string) map[string]string { return map[string]string{corev1.LabelMetadataName: ns} }
	pod := func(component string) map[string]string { return SelectorLabels(n, component) }
	member := func(component string) peer { return peer{n.Namespace, pod(component)} }
	stranger := peer{"tenant", map[string]string{"app": "notebook"}}
	sameNamespaceStranger := peer{n.Namespace, map[string]string{"app": "notebook"}}
	otherCluster := peer{n.Namespace, map[string]string{wellknown.LabelCluster: "other", wellknown.LabelComponent: wellknown.ComponentLogin}}
	sunk := peer{"sunk-system", map[string]string{"app.kubernetes.io/name": "sunk"}}
	prometheus := peer{"monitoring", map[string]string{"app": "prometheus"}}

	for _, c := range []struct {
		what string
		src  peer
		dst  string
		port int32
		want bool
	}{
		{"login to slurmctld", member(wellknown.ComponentLogin), wellknown.ComponentController, clusternames.SlurmctldPort, true},
		{"slurmctld to slurmd", member(wellknown.ComponentController), wellknown.ComponentCompute, clusternames.SlurmdPort, true},
		{"slurmd to srun's ephemeral port on login", member(wellknown.ComponentCompute), wellknown.ComponentLogin, 40123, true},
		{"slurmd to slurmd (fan-out)", member(wellknown.ComponentCompute), wellknown.ComponentCompute, clusternames.SlurmdPort, true},
		{"login sacct to slurmdbd", member(wellknown.ComponentLogin), wellknown.ComponentAccounting, clusternames.SlurmdbdPort, true},
		{"slurmdbd to MariaDB", member(wellknown.ComponentAccounting), wellknown.ComponentDatabase, clusternames.MariaDBPort, true},
		{"login to MariaDB", member(wellknown.ComponentLogin), wellknown.ComponentDatabase, clusternames.MariaDBPort, false},
		{"slurmctld to MariaDB", member(wellknown.ComponentController), wellknown.ComponentDatabase, clusternames.MariaDBPort, false},
		{"sunk to slurmrestd", sunk, wellknown.ComponentRestAPI, clusternames.SlurmrestdPort, true},
		{"sunk to the node watcher", sunk, wellknown.ComponentController, clusternames.NodeWatchPort, true},
		{"sunk to slurmctld", sunk, wellknown.ComponentController, clusternames.SlurmctldPort, false},
		{"sunk to MariaDB", sunk, wellknown.ComponentDatabase, clusternames.MariaDBPort, false},
		{"stranger to slurmctld", stranger, wellknown.ComponentController, clusternames.SlurmctldPort, false},
		{"stranger to slurmd", stranger, wellknown.ComponentCompute, clusternames.SlurmdPort, false},
		{"stranger to slurmdbd", stranger, wellknown.ComponentAccounting, clusternames.SlurmdbdPort, false},
		{"stranger to slurmrestd", stranger, wellknown.ComponentRestAPI, clusternames.SlurmrestdPort, false},
		{"stranger to MariaDB", stranger, wellknown.ComponentDatabase, clusternames.MariaDBPort, false},
		{"stranger to the node watcher", stranger, wellknown.ComponentController, clusternames.NodeWatchPort, false},
		{"stranger in the cluster's namespace to slurmctld", sameNamespaceStranger, wellknown.ComponentController, clusternames.SlurmctldPort, false},
		{"another cluster's login to slurmctld", otherCluster, wellknown.ComponentController, clusternames.SlurmctldPort, false},
		{"stranger to login's sshd", stranger, wellknown.ComponentLogin, clusternames.SSHPort, true},
		{"stranger to slurmd's port on login", stranger, wellknown.ComponentLogin, clusternames.SlurmdPort, false},
		{"extra ingress: prometheus to compute exporter", prometheus, wellknown.ComponentCompute, 9100, true},
		{"extra ingress: prometheus to slurmctld", prometheus, wellknown.ComponentController, clusternames.SlurmctldPort, false},
		{"extra ingress does not reach MariaDB", prometheus, wellknown.ComponentDatabase, 9100, false},
	} {
		if got := admits(t, policies, nsOf, n.Namespace, pod(c.dst), c.src, c.port); got != c.want {
			t.Errorf("%s (%s:%d): admitted %v, want %v", c.what, c.dst, c.port, got, c.want)
		}
	}
}

func TestNetworkPoliciesFollowTheSpec(t *testing.T) {
	names := func(sc *sunkv1.SlurmCluster, sunkNamespace string) []string {
		var out []string
		for _, p := range NetworkPolicies(sc, clusternames.For(sc, ""), sunkNamespace) {
			out = append(out, p.Name)
		}
		return out
	}
	sc := minimal() // no accounting, SSH on by default
	n := clusternames.For(sc, "")
	if got, want := strings.Join(names(sc, "sunk-system"), ","), strings.Join([]string{n.IngressPods, n.IngressSunk, n.IngressSSH}, ","); got != want {
		t.Errorf("minimal cluster: %s, want %s", got, want)
	}
	// An operator outside the Kubernetes cluster knows no namespace of sunk's to admit.
	if got, want := strings.Join(names(sc, ""), ","), strings.Join([]string{n.IngressPods, n.IngressSSH}, ","); got != want {
		t.Errorf("no sunk namespace: %s, want %s", got, want)
	}
	sc.Spec.Login.SSH.Enabled = ptr.To(false)
	sc.Spec.Accounting.Mode = sunkv1.AccountingManaged
	if got, want := strings.Join(names(sc, "sunk-system"), ","), strings.Join([]string{n.IngressPods, n.IngressDatabase, n.IngressSunk}, ","); got != want {
		t.Errorf("managed accounting, no SSH: %s, want %s", got, want)
	}
	if !NetworkPoliciesEnabled(sc) {
		t.Error("NetworkPolicies off by default")
	}
	sc.Spec.NetworkPolicy.Enabled = ptr.To(false)
	if NetworkPoliciesEnabled(sc) {
		t.Error("enabled: false left them on")
	}
}
