package nodeset

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmversion"
)

// registrationTopology is the Topology= member m's new pod registers with on Slurm 25.05 and
// later (render.RegistrationTopology): its place by its node's labels, when the topology.yaml
// slurmctld runs has it, so that the node is placed at once instead of at the next file and
// reconfigure. "" (register without, as on 24.11) whenever that is not certain: a string
// naming a place slurmctld lacks fails the registration, and the pod would never come up.
func (r *Reconciler) registrationTopology(ctx context.Context, w *world, m *member) string {
	node := w.nodes[m.node]
	if w.sc.Spec.Topology == nil || m.node == "" || node == nil {
		return ""
	}
	if !w.topologyRead {
		w.topologyRead, w.runningTopology = true, r.runningTopologyYAML(ctx, w)
	}
	return render.RegistrationTopology(w.sc.Spec.Topology, slurmversion.FeaturesOf(w.sc.Spec.Version()).TopologyStr,
		w.runningTopology, &render.TopologyNode{Name: m.name, Labels: node.Labels, Annotations: node.Annotations})
}

// runningTopologyYAML is the topology.yaml slurmctld runs: the config ConfigMap's, when its
// slurm.conf carries the hash the SlurmCluster says slurmctld runs (status.configHash); ""
// when it does not (a newer file kubelet may not have delivered, or slurmctld not
// reconfigured yet), or cannot be read.
func (r *Reconciler) runningTopologyYAML(ctx context.Context, w *world) string {
	if w.sc.Status.ConfigHash == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: w.names.Namespace, Name: w.names.Config}, cm); err != nil {
		log.FromContext(ctx).V(1).Info("reading the running topology.yaml; new pods register without Topology=", "error", err.Error())
		return ""
	}
	if render.HashInSlurmConf(cm.Data["slurm.conf"]) != w.sc.Status.ConfigHash {
		return ""
	}
	return cm.Data[render.TopologyYAMLFile]
}
