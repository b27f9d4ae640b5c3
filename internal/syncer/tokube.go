// Slurm to Kubernetes: the Slurm node's state mirrored on its pod and Kubernetes node.

package syncer

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// toKube writes the Slurm node's mirror on its pod and on the pod's Kubernetes node.
func (s *Syncer) toKube(ctx context.Context, pod *corev1.Pod, node *corev1.Node, sn *slurm.Node, since time.Time) error {
	if pod.Spec.NodeName == "" && sn == nil {
		return nil // not scheduled, not registered: nothing to say yet
	}
	m := Mirror{State: "unregistered", Available: false, Why: wellknown.ReasonSlurmNodeNotRegistered, Evictable: true}
	msg := fmt.Sprintf("Slurm has no node %s (yet)", pod.Name)
	if sn != nil {
		m = MirrorOf(sn)
		msg = fmt.Sprintf("Slurm node %s is %s", sn.Name, m.State)
		if m.Reason != "" {
			msg += ": " + m.Reason
		}
	}
	changed, err := s.mirrorPod(ctx, pod, m, msg)
	if err != nil {
		return err
	}
	if node != nil {
		pods, err := s.computePodsOn(ctx, node.Name)
		if err != nil {
			return err
		}
		var nodeChanged bool
		if len(pods) > 1 {
			// Several compute pods share the node (a Replicas NodeSet, or the pods of several
			// clusters): no one Slurm node is the node's, and writing each in turn would
			// rewrite the Node without end (two clusters' syncers did, every resync). The
			// pods carry the mirror; the node only says which cluster it serves.
			nodeChanged, err = s.unmirrorNode(ctx, node, true)
		} else {
			want := map[string]string{wellknown.LabelCluster: s.cfg.Cluster, wellknown.LabelSlurmNode: pod.Name}
			if ns := pod.Labels[wellknown.LabelNodeSet]; ns != "" {
				want[wellknown.LabelNodeSet] = ns
			}
			nodeChanged, err = s.mirrorNode(ctx, node, want, m, msg)
		}
		if err != nil {
			return err
		}
		changed = changed || nodeChanged
	}
	if changed {
		s.cfg.Metrics.corrected(s.cfg.Namespace, s.cfg.Cluster, DirectionToKube, "mirror", since)
	}
	return nil
}

// The mirror on a pod or a node (annotations, labels and the SlurmNodeAvailable condition) is
// written as one strategic merge patch to the status subresource. The API server's pod and
// node status strategies reset only the spec (and a pod's owner references) and keep the
// metadata, so one request carries both; two requests per object made mirroring the nodes a
// poll changed wait on twice the etcd commits (the integration tests hold the API server to
// this).

func (s *Syncer) mirrorPod(ctx context.Context, pod *corev1.Pod, m Mirror, msg string) (bool, error) {
	// The job mirror is written once the job cache has listed; before, the pod keeps its own.
	jobs, jobsKnown := pod.Annotations[wellknown.AnnotationSlurmJobs], s.jobs.HasSynced()
	if jobsKnown {
		jobs = s.onNode.on(pod.Name)
	}
	metaOK := pod.Annotations[wellknown.AnnotationSlurmState] == m.State && pod.Annotations[wellknown.AnnotationSlurmReason] == m.Reason &&
		(pod.Labels[wellknown.LabelEvictable] == "true") == m.Evictable && pod.Annotations[wellknown.AnnotationSlurmJobs] == jobs
	var cur *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if string(pod.Status.Conditions[i].Type) == wellknown.ConditionSlurmNode {
			cur = &pod.Status.Conditions[i]
		}
	}
	status := conditionStatus(m.Available)
	condOK := cur != nil && cur.Status == status && cur.Reason == m.Why && cur.Message == msg
	if metaOK && condOK {
		return false, nil
	}
	// The patch is computed from the metadata alone, so it names just this condition and
	// leaves kubelet's to kubelet.
	orig := &corev1.Pod{ObjectMeta: *pod.ObjectMeta.DeepCopy()}
	p := orig.DeepCopy()
	setMirrorAnnotations(&p.ObjectMeta, m)
	if jobs == "" {
		delete(p.Annotations, wellknown.AnnotationSlurmJobs)
	} else {
		p.Annotations[wellknown.AnnotationSlurmJobs] = jobs
	}
	if m.Evictable {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[wellknown.LabelEvictable] = "true"
	} else {
		delete(p.Labels, wellknown.LabelEvictable)
	}
	if !condOK {
		cond := corev1.PodCondition{Type: wellknown.ConditionSlurmNode, Status: status, Reason: m.Why, Message: msg,
			LastTransitionTime: metav1.Now()}
		if cur != nil && cur.Status == status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		p.Status.Conditions = []corev1.PodCondition{cond}
	}
	if err := s.client.Status().Patch(ctx, p, client.StrategicMergeFrom(orig)); err != nil {
		return false, s.kubeError(fmt.Errorf("mirroring Slurm node on pod %s: %w", pod.Name, err))
	}
	return true, nil
}

func (s *Syncer) mirrorNode(ctx context.Context, node *corev1.Node, labels map[string]string, m Mirror, msg string) (bool, error) {
	metaOK := node.Annotations[wellknown.AnnotationSlurmState] == m.State && node.Annotations[wellknown.AnnotationSlurmReason] == m.Reason
	for k, v := range labels {
		metaOK = metaOK && node.Labels[k] == v
	}
	var cur *corev1.NodeCondition
	for i := range node.Status.Conditions {
		if string(node.Status.Conditions[i].Type) == wellknown.ConditionSlurmNode {
			cur = &node.Status.Conditions[i]
		}
	}
	status := conditionStatus(m.Available)
	condOK := cur != nil && cur.Status == status && cur.Reason == m.Why && cur.Message == msg
	if metaOK && condOK {
		return false, nil
	}
	orig := &corev1.Node{ObjectMeta: *node.ObjectMeta.DeepCopy()}
	n := orig.DeepCopy()
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	setMirrorAnnotations(&n.ObjectMeta, m)
	if !condOK {
		now := metav1.Now()
		cond := corev1.NodeCondition{Type: wellknown.ConditionSlurmNode, Status: status, Reason: m.Why, Message: msg,
			LastHeartbeatTime: now, LastTransitionTime: now}
		if cur != nil && cur.Status == status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		n.Status.Conditions = []corev1.NodeCondition{cond}
	}
	if err := s.client.Status().Patch(ctx, n, client.StrategicMergeFrom(orig)); err != nil {
		return false, s.kubeError(fmt.Errorf("mirroring Slurm node on node %s: %w", node.Name, err))
	}
	return true, nil
}

// syncNode takes the mirror off a Kubernetes node that no longer hosts a compute pod of
// this cluster, and has the one pod of a node no longer shared mirror itself onto it again.
func (s *Syncer) syncNode(ctx context.Context, name string) error {
	if s.slurmUnreadable() != nil {
		s.deferKey(nodeKeyPrefix + name)
		return nil
	}
	node := &corev1.Node{}
	if err := s.cache.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if node.Labels[wellknown.LabelCluster] != s.cfg.Cluster {
		return nil
	}
	pods, err := s.podsOn(ctx, name)
	if err != nil {
		return err
	}
	if len(pods) == 1 {
		// The node is no longer shared: its one pod mirrors its Slurm node onto it again.
		// (A pod joining makes the node shared in that pod's own sync.)
		s.queue.Add(pods[0].Name)
	}
	if len(pods) > 0 {
		return nil
	}
	// Unmirror from a fresh read: the cache may not show yet the mirror this syncer wrote a
	// moment before (the drain of the node's last pod), and taking the labels off a node whose
	// cached copy lacks that condition would leave the condition there with nothing that
	// brings the node back here (nodeEvent follows the cluster label) until the resync.
	fresh := &corev1.Node{}
	if err := s.live.Get(ctx, types.NamespacedName{Name: name}, fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	_, err = s.unmirrorNode(ctx, fresh, false)
	return err
}

// unmirrorNode takes one Slurm node's mirror (condition, annotations, Slurm node and NodeSet
// labels) off a Kubernetes node; keepCluster leaves the cluster label, for a node that still
// hosts several compute pods. It writes only what is there.
func (s *Syncer) unmirrorNode(ctx context.Context, node *corev1.Node, keepCluster bool) (bool, error) {
	changed := false
	for _, c := range node.Status.Conditions {
		if string(c.Type) != wellknown.ConditionSlurmNode {
			continue
		}
		// The condition first: the labels are what marks the node as still to be cleaned.
		raw := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"$patch":"delete"}]}}`, wellknown.ConditionSlurmNode)
		if err := s.client.Status().Patch(ctx, node.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, []byte(raw))); err != nil {
			return false, s.kubeError(fmt.Errorf("removing condition from node %s: %w", node.Name, err))
		}
		changed = true
	}
	n := node.DeepCopy()
	patch := client.MergeFrom(node)
	keys := []string{wellknown.LabelNodeSet, wellknown.LabelSlurmNode}
	if keepCluster {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		// A node another cluster labelled first keeps that label: two clusters setting it in
		// turn would rewrite the Node without end.
		if n.Labels[wellknown.LabelCluster] == "" {
			n.Labels[wellknown.LabelCluster] = s.cfg.Cluster
		}
	} else {
		keys = append(keys, wellknown.LabelCluster)
	}
	for _, k := range keys {
		delete(n.Labels, k)
	}
	delete(n.Annotations, wellknown.AnnotationSlurmState)
	delete(n.Annotations, wellknown.AnnotationSlurmReason)
	if equality.Semantic.DeepEqual(n.ObjectMeta, node.ObjectMeta) {
		return changed, nil
	}
	if err := s.client.Patch(ctx, n, patch); err != nil {
		return false, s.kubeError(fmt.Errorf("unlabelling node %s: %w", node.Name, err))
	}
	return true, nil
}

func setMirrorAnnotations(o *metav1.ObjectMeta, m Mirror) {
	if o.Annotations == nil {
		o.Annotations = map[string]string{}
	}
	o.Annotations[wellknown.AnnotationSlurmState] = m.State
	o.Annotations[wellknown.AnnotationSlurmReason] = m.Reason
}

func conditionStatus(ok bool) corev1.ConditionStatus {
	if ok {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}
