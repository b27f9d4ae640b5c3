package slurmcluster

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// perCluster are the Reconciler's maps keyed by a SlurmCluster's UID: what it remembers of a
// cluster between reconciles. A map added to the Reconciler must be listed here, or a deleted
// cluster's entries stay for the operator's lifetime (TestForgetReleasesEveryClusterMap).
func (r *Reconciler) perCluster() []*sync.Map {
	return []*sync.Map{&r.applied, &r.jwt, &r.authReconfigured, &r.reconfigureFailed,
		&r.pendingTopologies, &r.upgradeStep, &r.unsafeReported}
}

// rememberUID notes the UID a cluster's name has now. A cluster deleted and created again
// under its name is another cluster: what was remembered of the old one goes.
func (r *Reconciler) rememberUID(sc *sunkv1.SlurmCluster) {
	key := client.ObjectKeyFromObject(sc)
	if old, loaded := r.uids.Swap(key, sc.UID); loaded && old.(types.UID) != sc.UID {
		r.forgetUID(old.(types.UID))
		r.Metrics.forget(key)
	}
}

// forget drops what is remembered of a cluster that is gone, and its series: an operator that
// sees clusters come and go (a namespace per CI run, a tenant's short-lived cluster) does not
// grow with them.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.Metrics.forget(key)
	if uid, ok := r.uids.LoadAndDelete(key); ok {
		r.forgetUID(uid.(types.UID))
	}
}

func (r *Reconciler) forgetUID(uid types.UID) {
	for _, m := range r.perCluster() {
		m.Delete(uid)
	}
}
