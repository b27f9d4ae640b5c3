package slurmcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/wellknown"
)

// The node labels are read as metadata through the cache the NodeSet controller shares.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Debouncing of topology changes. In Slurm 24.11 a node enters the topology only when
// slurmctld rereads topology.conf, which is a reconfigure; a NodeSet scale or a rack coming
// up changes the set one pod at a time, and a reconfigure per pod re-executes slurmctld as
// many times. A changed topology is applied once it has stood still for TopologySettle, or
// at the latest TopologyMaxDelay after the first change, whichever comes first.
const (
	DefaultTopologySettle   = 10 * time.Second
	DefaultTopologyMaxDelay = 60 * time.Second
)

// pendingTopology is a rendered topology.conf waiting for the nodes to settle.
type pendingTopology struct {
	conf        string
	first, last time.Time // the first change since the file was written, and the latest
}

// decideTopology says whether to write the desired topology.conf over the current one now,
// what stays pending, and how long to wait before looking again.
func decideTopology(current, desired string, pending *pendingTopology, now time.Time, settle, maxDelay time.Duration) (apply bool, next *pendingTopology, wait time.Duration) {
	if desired == current {
		return true, nil, 0
	}
	// No file yet, or another plugin or other label keys: nothing to keep.
	if current == "" || render.TopologyHeaders(current) != render.TopologyHeaders(desired) {
		return true, nil, 0
	}
	switch {
	case pending == nil:
		next = &pendingTopology{conf: desired, first: now, last: now}
	case pending.conf != desired:
		next = &pendingTopology{conf: desired, first: pending.first, last: now}
	default:
		next = pending
	}
	quiet, waited := now.Sub(next.last), now.Sub(next.first)
	if quiet >= settle || waited >= maxDelay {
		return true, nil, 0
	}
	return false, next, min(settle-quiet, maxDelay-waited)
}

// topology renders the cluster's topology.conf, or with yaml (Slurm 25.05 and later)
// topology.yaml, from its compute pods and their nodes' labels, debounced, and reports it in
// the status; with byStr (nodes move by topology_str) the file keeps every place a node's
// string names (topology_str.go). With tree and block together nodes move by the file and a
// reconfigure only: a node update's topology_str would have to name the node's place in both
// topologies, which sunk does not build yet. nil without spec.topology.
func (r *Reconciler) topology(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, yaml, byStr bool, keys slurmconn.Keys, st *status) (*render.Topology, time.Duration, error) {
	if sc.Spec.Topology == nil {
		r.pendingTopologies.Delete(sc.UID)
		meta.RemoveStatusCondition(&st.conditions, sunkv1.ConditionTopologyReady)
		st.topology = nil
		return nil, 0, nil
	}
	nodes, err := r.topologyNodes(ctx, n)
	if err != nil {
		return nil, 0, err
	}
	cm := &corev1.ConfigMap{}
	if err := r.get(ctx, n, n.Config, cm); err != nil {
		return nil, 0, err
	}
	desired, err := render.RenderTopology(sc.Spec.Topology, nodes)
	if err == nil && byStr && desired.Also == nil {
		err = r.keepStringPlaces(ctx, sc, n, keys, cm.Data[render.TopologyYAMLFile], desired)
	}
	if err != nil {
		// Never reaches slurmctld: the file it runs with stays.
		st.set(sunkv1.ConditionTopologyReady, false, sunkv1.ReasonTopologyInvalid, err.Error())
		kept, kerr := render.RenderTopology(sc.Spec.Topology, nil)
		if kerr != nil {
			return nil, 0, kerr
		}
		name, empty, kerr := render.TopologyFile(kept, yaml)
		if kerr != nil {
			return nil, 0, kerr
		}
		if current := cm.Data[name]; current != "" && render.TopologyHeaders(current) == render.TopologyHeaders(empty) {
			keep(kept, current, yaml)
		}
		return kept, 0, nil
	}
	// The file slurmctld runs with: topology.conf, or on 25.05 and later topology.yaml.
	name, desiredFile, err := render.TopologyFile(desired, yaml)
	if err != nil {
		return nil, 0, err
	}
	current := cm.Data[name]
	var pending *pendingTopology
	if p, ok := r.pendingTopologies.Load(sc.UID); ok {
		pending = p.(*pendingTopology)
	}
	apply, next, wait := decideTopology(current, desiredFile, pending, time.Now(), r.topologySettle(), r.topologyMaxDelay())
	if next == nil {
		r.pendingTopologies.Delete(sc.UID)
	} else {
		r.pendingTopologies.Store(sc.UID, next)
	}
	unlabelled, excluded, problems, renamed := desired.Unlabelled, desired.Excluded, desired.Problems, desired.Renamed
	msg := fmt.Sprintf("%d compute nodes in %s", desired.Nodes, desired.Plugin)
	if a := desired.Also; a != nil && yaml { // topology.conf (24.11) holds the tree alone
		// Counted per topology: a node without either label counts twice.
		unlabelled, excluded = unlabelled+a.Unlabelled, excluded+a.Excluded
		problems, renamed = append(slices.Clone(problems), a.Problems...), append(slices.Clone(renamed), a.Renamed...)
		msg += " and " + a.Plugin
	}
	st.topology = &sunkv1.TopologyStatus{Nodes: int32(desired.Nodes), UnlabelledNodes: int32(unlabelled), ExcludedNodes: int32(excluded)}
	if r := renamed; len(r) > 0 {
		more := ""
		if len(r) > 3 {
			r, more = r[:3], fmt.Sprintf(" and %d more", len(r)-3)
		}
		msg += fmt.Sprintf(" (label values renamed for Slurm: %s%s)", strings.Join(r, ", "), more)
	}
	if desired.SlurmPlugin() == "" {
		msg += " (slurm.conf names no TopologyPlugin until a switch or block has a node)"
	}
	switch {
	case excluded > 0:
		st.set(sunkv1.ConditionTopologyReady, false, sunkv1.ReasonTopologyLeftOut, msg+"; "+strings.Join(problems, "; "))
	case unlabelled > 0:
		st.set(sunkv1.ConditionTopologyReady, false, sunkv1.ReasonTopologyUnlabelled, msg+"; "+strings.Join(problems, "; "))
	default:
		st.set(sunkv1.ConditionTopologyReady, true, sunkv1.ReasonTopologyPlaced, msg+", every one under a labelled switch or block")
	}
	if apply {
		return desired, 0, nil
	}
	log.FromContext(ctx).V(1).Info("topology changed; waiting for the nodes to settle", "wait", wait)
	kept := *desired
	keep(&kept, current, yaml)
	return &kept, wait, nil
}

// keep makes t write file, the one written before, instead of its own rendering.
func keep(t *render.Topology, file string, yaml bool) {
	if yaml {
		t.Kept = file
		return
	}
	t.Conf = file
}

// topologyNodes are the compute pods whose slurmd runs (Ready: s6 has it up and it listens,
// and it registers right after), with their Kubernetes nodes' labels. A pod that is not
// Ready is left out: in 24.11 a node name slurmctld does not know yet is skipped, and a
// block that counts fewer known nodes than the base block stops slurmctld.
func (r *Reconciler) topologyNodes(ctx context.Context, n clusternames.Names) ([]render.TopologyNode, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(n.Namespace), client.MatchingLabels(render.SelectorLabels(n, wellknown.ComponentCompute))); err != nil {
		return nil, err
	}
	var nodes []render.TopologyNode
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !pod.DeletionTimestamp.IsZero() || pod.Spec.NodeName == "" || !kube.PodReady(pod) {
			continue
		}
		node := nodeMetadata()
		if err := r.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		nodes = append(nodes, render.TopologyNode{Name: pod.Name, Labels: node.Labels, Annotations: node.Annotations})
	}
	return nodes, nil
}

func (r *Reconciler) topologySettle() time.Duration {
	if r.TopologySettle > 0 {
		return r.TopologySettle
	}
	return DefaultTopologySettle
}

func (r *Reconciler) topologyMaxDelay() time.Duration {
	if r.TopologyMaxDelay > 0 {
		return r.TopologyMaxDelay
	}
	return DefaultTopologyMaxDelay
}

func nodeMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return m
}

// computePodPlacementChanged passes the compute pod events that can change a topology: a
// pod appearing or going, binding to a node, turning Ready or not, being deleted.
var computePodPlacementChanged = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return isComputePod(e.Object) },
	DeleteFunc:  func(e event.DeleteEvent) bool { return isComputePod(e.Object) },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		if !isComputePod(e.ObjectNew) {
			return false
		}
		return placement(e.ObjectOld) != placement(e.ObjectNew)
	},
}

func isComputePod(o client.Object) bool {
	return o.GetLabels()[wellknown.LabelComponent] == wellknown.ComponentCompute && o.GetLabels()[wellknown.LabelCluster] != ""
}

func placement(o client.Object) string {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s/%t/%t", pod.Spec.NodeName, kube.PodReady(pod), pod.DeletionTimestamp.IsZero())
}

// nodeTopologyChanged passes node updates that change labels or the topology annotations,
// not the heartbeats and status writes that make most node events.
var nodeTopologyChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		if !mapsEqual(o.GetLabels(), n.GetLabels()) {
			return true
		}
		for _, k := range []string{wellknown.AnnotationTopologyTree, wellknown.AnnotationTopologyBlock} {
			if o.GetAnnotations()[k] != n.GetAnnotations()[k] {
				return true
			}
		}
		return false
	},
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// clusterOfComputePod maps a compute pod to its cluster, when the cluster renders a topology.
func (r *Reconciler) clusterOfComputePod(ctx context.Context, o client.Object) []ctrl.Request {
	key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetLabels()[wellknown.LabelCluster]}
	if !r.rendersTopology(ctx, key) {
		return nil
	}
	return []ctrl.Request{{NamespacedName: key}}
}

// clustersOnNode maps a Kubernetes node to the clusters with a compute pod on it.
func (r *Reconciler) clustersOnNode(ctx context.Context, o client.Object) []ctrl.Request {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.MatchingLabels{wellknown.LabelComponent: wellknown.ComponentCompute}); err != nil {
		log.FromContext(ctx).Error(err, "listing compute pods for a node label change")
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var reqs []ctrl.Request
	for _, pod := range pods.Items {
		key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Labels[wellknown.LabelCluster]}
		if pod.Spec.NodeName != o.GetName() || key.Name == "" || seen[key] {
			continue
		}
		seen[key] = true
		if r.rendersTopology(ctx, key) {
			reqs = append(reqs, ctrl.Request{NamespacedName: key})
		}
	}
	return reqs
}

func (r *Reconciler) rendersTopology(ctx context.Context, key types.NamespacedName) bool {
	sc := &sunkv1.SlurmCluster{}
	return r.Get(ctx, key, sc) == nil && sc.Spec.Topology != nil
}
