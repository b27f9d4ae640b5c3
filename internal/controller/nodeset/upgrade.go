package nodeset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
)

// computeRelease is the SlurmCluster as the NodeSet's pods may run it now. During an upgrade
// (slurmctld's pod template or one of its pods on another release than spec.slurmVersion; the
// SlurmCluster controller moves slurmctld after slurmdbd, docs/slurmcluster.md) the pods keep
// the release slurmctld's template names and the image their pods of that release run
// (slurmctld's image when there are none): a slurmd never runs a newer release than slurmctld,
// and the NodeSet's protected update (drain, replace idle pods) starts only once slurmctld runs
// the new release on every replica. held says so. A NodeSet with an image of its own is its
// owner's to move.
func (r *Reconciler) computeRelease(ctx context.Context, ns *sunkv1.NodeSet, sc *sunkv1.SlurmCluster) (*sunkv1.SlurmCluster, bool, error) {
	if ns.Spec.Image != "" {
		return sc, false, nil
	}
	n := clusternames.For(sc, r.ClusterDomain)
	ctld := &appsv1.StatefulSet{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: n.Controller}, ctld); err != nil {
		if apierrors.IsNotFound(err) { // a new cluster: nothing runs an older release
			return sc, false, nil
		}
		return nil, false, err
	}
	tmpl, ready := kube.RolledOut(ctld)
	// The release slurmctld runs for sure: its template's, unless a pod still runs another.
	heldV, heldImage := tmpl.Labels[wellknown.LabelSlurmVersion], containerImage(tmpl.Spec.Containers, render.ControllerContainer)
	if heldV == sc.Spec.SlurmVersion {
		if ready {
			return sc, false, nil
		}
		var ctldPods corev1.PodList
		if err := r.List(ctx, &ctldPods, client.InNamespace(sc.Namespace), client.MatchingLabels(render.SelectorLabels(n, wellknown.ComponentController))); err != nil {
			return nil, false, err
		}
		older := false
		for _, p := range ctldPods.Items {
			if v := p.Labels[wellknown.LabelSlurmVersion]; v != heldV && !older {
				older, heldV, heldImage = true, v, containerImage(p.Spec.Containers, render.ControllerContainer)
			}
		}
		if !older { // not an upgrade: slurmctld's pods are restarting or starting
			return sc, false, nil
		}
	}
	held := sc.DeepCopy()
	held.Spec.SlurmVersion, held.Spec.Image = heldV, sunkv1.Image(heldImage)
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(ns.Namespace), client.MatchingLabels{wellknown.LabelNodeSet: ns.Name}); err != nil {
		return nil, false, err
	}
	for _, p := range pods.Items {
		if img := containerImage(p.Spec.Containers, clusternames.SlurmdContainer); p.Labels[wellknown.LabelSlurmVersion] == heldV && img != "" {
			held.Spec.Image = sunkv1.Image(img)
		}
	}
	return held, true, nil
}

func containerImage(cs []corev1.Container, name string) string {
	for _, c := range cs {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}
