// The NetworkPolicies of a SlurmCluster: who may reach its daemons.

package render

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// NetworkPoliciesEnabled says whether the cluster's pods get NetworkPolicies (on by default).
func NetworkPoliciesEnabled(sc *sunkv1.SlurmCluster) bool {
	return ptr.Deref(sc.Spec.NetworkPolicy.Enabled, true)
}

// NetworkPolicies admit to the cluster's pods only what Slurm and sunk need; a pod selected by
// a NetworkPolicy takes only what some policy admits, so everything else is denied:
//   - IngressPods: every pod of the cluster but MariaDB's takes the cluster's own pods on any
//     port (slurmctld's and slurmd's RPCs, slurmd's fan-out, srun's I/O and its ephemeral
//     ports, sacct to slurmdbd), and spec.networkPolicy.ingress;
//   - IngressDatabase: MariaDB takes slurmdbd alone, on its port (managed accounting only);
//   - IngressSunk: slurmrestd and the node watcher also take sunk's components, the pods of
//     sunkNamespace (the operator's: the sunk chart runs the syncer and sunk-scheduler there);
//     none without one (an operator outside the Kubernetes cluster);
//   - IngressSSH: the login pods' sshd takes anyone (with SSH enabled);
//   - IngressLoginPools: so does the sshd of login pools' pods (with spec.login.pools): a
//     PerUser pod's on 2222, a Group pool's on 22.
//
// Traffic from the pod's own node (kubelet's probes) is the network plugin's to admit: the
// NetworkPolicy API cannot name it, and every enforcing plugin lets it in.
func NetworkPolicies(sc *sunkv1.SlurmCluster, n clusternames.Names, sunkNamespace string) []*networkingv1.NetworkPolicy {
	clusterPods := metav1.LabelSelector{MatchLabels: map[string]string{wellknown.LabelCluster: n.Cluster}}
	pods := ingressPolicy(n, n.IngressPods, metav1.LabelSelector{
		MatchLabels: map[string]string{wellknown.LabelCluster: n.Cluster},
		MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: wellknown.LabelComponent, Operator: metav1.LabelSelectorOpNotIn, Values: []string{wellknown.ComponentDatabase},
		}},
	}, networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &clusterPods}}})
	pods.Spec.Ingress = append(pods.Spec.Ingress, sc.Spec.NetworkPolicy.Ingress...)
	out := []*networkingv1.NetworkPolicy{pods}
	if sc.Spec.Accounting.Mode == sunkv1.AccountingManaged {
		slurmdbd := metav1.LabelSelector{MatchLabels: SelectorLabels(n, wellknown.ComponentAccounting)}
		out = append(out, ingressPolicy(n, n.IngressDatabase, metav1.LabelSelector{MatchLabels: SelectorLabels(n, wellknown.ComponentDatabase)},
			networkingv1.NetworkPolicyIngressRule{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &slurmdbd}},
				Ports: tcpPorts(clusternames.MariaDBPort),
			}))
	}
	if sunkNamespace != "" {
		out = append(out, ingressPolicy(n, n.IngressSunk, metav1.LabelSelector{
			MatchLabels: map[string]string{wellknown.LabelCluster: n.Cluster},
			MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: wellknown.LabelComponent, Operator: metav1.LabelSelectorOpIn,
				Values: []string{wellknown.ComponentController, wellknown.ComponentRestAPI},
			}},
		}, networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: sunkNamespace},
			}}},
			Ports: tcpPorts(clusternames.SlurmrestdPort, clusternames.NodeWatchPort),
		}))
	}
	if SSHEnabled(sc) {
		out = append(out, ingressPolicy(n, n.IngressSSH, metav1.LabelSelector{MatchLabels: SelectorLabels(n, wellknown.ComponentLogin)},
			networkingv1.NetworkPolicyIngressRule{Ports: tcpPorts(clusternames.SSHPort)}))
	}
	if len(sc.Spec.Login.Pools) > 0 {
		out = append(out, ingressPolicy(n, n.IngressLoginPools, metav1.LabelSelector{
			MatchLabels: map[string]string{wellknown.LabelCluster: n.Cluster},
			MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: wellknown.LabelComponent, Operator: metav1.LabelSelectorOpIn,
				Values: []string{wellknown.ComponentLoginUser, wellknown.ComponentLoginGroup},
			}},
		}, networkingv1.NetworkPolicyIngressRule{Ports: tcpPorts(clusternames.SSHPort, clusternames.LoginUserSSHPort)}))
	}
	return out
}

// ingressPolicy admits rule to the pods of selector. Its labels name the cluster and no
// component: the operator's cache holds what carries LabelCluster.
func ingressPolicy(n clusternames.Names, name string, selector metav1.LabelSelector, rule networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
	m := meta(n, name, "")
	delete(m.Labels, wellknown.LabelComponent)
	delete(m.Labels, "app.kubernetes.io/component")
	return &networkingv1.NetworkPolicy{
		ObjectMeta: m,
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: selector,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{rule},
		},
	}
}

func tcpPorts(ports ...int32) []networkingv1.NetworkPolicyPort {
	out := make([]networkingv1.NetworkPolicyPort, len(ports))
	for i, p := range ports {
		out[i] = networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(p))}
	}
	return out
}
