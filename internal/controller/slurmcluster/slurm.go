package slurmcluster

import (
	"context"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
)

// slurmFor is the cluster's REST client from the pool, with keys the caller has read, speaking
// the version the SlurmCluster names (or the newest both sides know). Every step that speaks to
// slurmrestd gets its client here; the pool (internal/slurmconn) is shared with the NodeSet
// controller, so a cluster has one client per operator process.
func (r *Reconciler) slurmFor(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, keys slurmconn.Keys) (slurm.Client, error) {
	return r.Slurm.ForKeys(ctx, n, sc.Spec.RestAPI.Version, keys)
}
