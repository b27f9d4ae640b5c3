package main

import (
	"context"
	"flag"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"sunk.dev/sunk/internal/exporter"
	"sunk.dev/sunk/internal/syncer"
	"sunk.dev/sunk/pkg/wellknown"
)

// The Slurm exporter runs in the syncer (docs/monitoring.md): it exports the clusters the
// syncer syncs, on the syncer's REST clients and metrics port, and only on the leader.
var (
	exporterEnabled = flag.Bool("slurm-exporter", true,
		"export every synced cluster's Slurm state (nodes, jobs, partitions, scheduler statistics) as slurm_* metrics on the metrics endpoint")
	exporterInterval = flag.Duration("slurm-exporter-interval", exporter.DefaultInterval,
		"how often the exporter reads each cluster's jobs, partitions and /diag; scrapes are served from that snapshot")
	exporterUserSeries = flag.Bool("slurm-exporter-user-series", false,
		"add per-user and per-account job series (one series per user or account and job state)")
)

// addExporter registers the Slurm exporter on the metrics registry and runs its refreshes
// with the manager (after leader election, like the Syncers whose clusters it exports).
func addExporter(mgr ctrl.Manager, clusters *syncer.Clusters) error {
	if !*exporterEnabled {
		return nil
	}
	pods := mgr.GetCache() // compute pods only: the manager caches no other pods
	e := exporter.New(func() []exporter.Target {
		running := clusters.Running()
		out := make([]exporter.Target, 0, len(running))
		for _, r := range running {
			t := exporter.Target{Name: r.Key.String(), Slurm: r.Slurm, Pods: computePods(pods, r.Key.Namespace, r.Key.Name)}
			if r.Nodes != nil { // a nil *Informer in the interface would not read as nil
				t.Nodes = r.Nodes
			}
			out = append(out, t)
		}
		return out
	}, exporter.Options{Interval: *exporterInterval, UserSeries: *exporterUserSeries})
	if err := crmetrics.Registry.Register(e); err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(e.Run))
}

// computePods joins Slurm nodes to their compute pods (a pod's name is its Slurm node's) from
// the manager's cache: their NodeSet and Kubernetes node.
func computePods(r client.Reader, namespace, cluster string) func(context.Context) (map[string]exporter.PodInfo, error) {
	return func(ctx context.Context) (map[string]exporter.PodInfo, error) {
		l := &corev1.PodList{}
		if err := r.List(ctx, l, client.InNamespace(namespace), client.MatchingLabels{
			wellknown.LabelCluster: cluster, wellknown.LabelComponent: wellknown.ComponentCompute}); err != nil {
			return nil, err
		}
		out := make(map[string]exporter.PodInfo, len(l.Items))
		for i := range l.Items {
			p := &l.Items[i]
			out[p.Name] = exporter.PodInfo{NodeSet: p.Labels[wellknown.LabelNodeSet], KubeNode: p.Spec.NodeName}
		}
		return out, nil
	}
}
