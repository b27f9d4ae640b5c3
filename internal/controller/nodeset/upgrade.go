package nodeset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
)

// computeRelease is the SlurmCluster as the NodeSet's pods may run it now. While slurmctld's
// StatefulSet is not rolled out on spec.slurmVersion (an upgrade moves it after slurmdbd;
// docs/slurmcluster.md), compute pods keep slurmctld's image and release, so that the
// NodeSet's protected update (drain, replace idle pods) starts only once slurmctld runs the
// new release. held says so. A NodeSet with an image of its own is its owner's to move.
func (r *Reconciler) computeRelease(ctx context.Context, ns *sunkv1.NodeSet, sc *sunkv1.SlurmCluster) (*sunkv1.SlurmCluster, bool, error) {
	if ns.Spec.Image != "" {
		return sc, false, nil
	}
	n := render.NamesFor(sc, r.ClusterDomain)
	ctld := &appsv1.StatefulSet{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: n.Controller}, ctld); err != nil {
		if apierrors.IsNotFound(err) { // a new cluster: nothing runs an older release
			return sc, false, nil
		}
		return nil, false, err
	}
	tmpl, ready := kube.RolledOut(ctld)
	v := tmpl.Labels[wellknown.LabelSlurmVersion]
	if ready && v == sc.Spec.SlurmVersion {
		return sc, false, nil
	}
	held := sc.DeepCopy()
	held.Spec.SlurmVersion = v
	for _, c := range tmpl.Spec.Containers {
		if c.Name == render.ControllerContainer {
			held.Spec.Image = sunkv1.Image(c.Image)
		}
	}
	return held, true, nil
}
