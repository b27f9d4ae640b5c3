// sunk-syncer keeps every SlurmCluster's Slurm node state and its compute pods and Kubernetes
// nodes in agreement, both ways (docs/syncer.md).
package main

import (
	"flag"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"sunk.dev/sunk/internal/cmdutil"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/internal/syncer"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

func main() {
	var probeAddr, clusterDomain, leaderNS, watchNamespaces string
	var leaderElect bool
	var poll, notReadyGrace time.Duration
	var drainBudget, workers int
	metricsOptions := cmdutil.MetricsFlags()
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&clusterDomain, "cluster-domain", "cluster.local", "the Kubernetes cluster's DNS domain")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so that several replicas can run; only the leader syncs")
	flag.StringVar(&leaderNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's)")
	flag.DurationVar(&poll, "poll-interval", syncer.DefaultPollInterval, "how often Slurm's node list is polled with update_time (slurmrestd answers an unchanged list with no nodes)")
	flag.DurationVar(&notReadyGrace, "not-ready-grace", syncer.DefaultNotReadyGrace, "how long a compute pod that was Ready may be not Ready before its Slurm node is drained")
	flag.IntVar(&drainBudget, "drain-budget-percent", syncer.DefaultDrainBudgetPercent, "share of a cluster's Slurm nodes that one cause (node NotReady, pod not Ready) may hold drained at once, at least 1 node; 100 lifts the limit")
	flag.StringVar(&watchNamespaces, "watch-namespaces", "", "comma-separated namespaces whose SlurmClusters this syncer syncs; empty: all")
	flag.IntVar(&workers, "workers", syncer.DefaultWorkers, "nodes synced in parallel per cluster; a sync waits mostly on the Kubernetes API and slurmrestd, so this bounds how fast a change to many nodes at once (a cordon, a Slurm reboot) is mirrored")
	leaseTimings := cmdutil.LeaderElectionFlags()
	log := cmdutil.ParseFlags()

	scheme := cmdutil.Scheme()
	computePods := labels.SelectorFromSet(labels.Set{wellknown.LabelComponent: wellknown.ComponentCompute})
	opts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOptions(),
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "sunk-syncer.sunk.dev",
		LeaderElectionNamespace: leaderNS,
		// main returns as soon as the manager stops, so the Lease can go at once: a rollout's
		// new pod syncs within a second instead of after the lease duration.
		LeaderElectionReleaseOnCancel: true,
		// Only compute pods are cached, not every pod of the cluster.
		Cache: cache.Options{DefaultNamespaces: cmdutil.WatchNamespaces(watchNamespaces),
			ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: computePods}}},
	}
	leaseTimings(&opts)
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), opts)
	cmdutil.Must(err)
	restMetrics, err := slurm.NewMetrics(crmetrics.Registry)
	cmdutil.Must(err)
	syncMetrics, err := syncer.NewMetrics(crmetrics.Registry)
	cmdutil.Must(err)
	// The Service and the Secret are read past the cache: neither is worth caching
	// cluster-wide for one read per cluster.
	pool := slurmconn.New(slurmconn.Options{Reader: mgr.GetAPIReader(), Metrics: restMetrics, Timeout: 10 * time.Second})
	ctx := ctrl.SetupSignalHandler()
	clusters := &syncer.Clusters{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Slurm: pool, ClusterDomain: clusterDomain,
		PollInterval: poll, NotReadyGrace: notReadyGrace, DrainBudgetPercent: drainBudget, Workers: workers, Metrics: syncMetrics,
	}
	cmdutil.Must(clusters.SetupWithManager(ctx, mgr))
	cmdutil.Must(addExporter(mgr, clusters))
	cmdutil.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	cmdutil.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))
	log.Info("starting sunk-syncer", "pollInterval", poll)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
