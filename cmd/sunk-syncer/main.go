// sunk-syncer keeps every SlurmCluster's Slurm node state and its compute pods and Kubernetes
// nodes in agreement, both ways (docs/syncer.md).
package main

import (
	"flag"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/syncer"
	"sunk.dev/sunk/pkg/slurm"
)

func main() {
	var metricsAddr, probeAddr, clusterDomain, leaderNS string
	var leaderElect bool
	var poll time.Duration
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables it)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&clusterDomain, "cluster-domain", "cluster.local", "the Kubernetes cluster's DNS domain")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so that several replicas can run; only the leader syncs")
	flag.StringVar(&leaderNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's)")
	flag.DurationVar(&poll, "poll-interval", syncer.DefaultPollInterval, "how often Slurm's node list is polled (an unchanged cluster answers 304)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	must(clientgoscheme.AddToScheme(scheme))
	must(sunkv1.AddToScheme(scheme))
	computePods := labels.SelectorFromSet(labels.Set{render.LabelComponent: render.ComponentCompute})
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "sunk-syncer.sunk.dev",
		LeaderElectionNamespace: leaderNS,
		// Only compute pods are cached, not every pod of the cluster.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: computePods}}},
	})
	must(err)
	restMetrics, err := slurm.NewMetrics(crmetrics.Registry)
	must(err)
	syncMetrics, err := syncer.NewMetrics(crmetrics.Registry)
	must(err)
	factory := func(url string, key []byte) (slurm.Client, error) {
		tokens, err := slurm.NewJWTSource("slurm", key)
		if err != nil {
			return nil, err
		}
		return slurm.New(slurm.Config{URL: url, APIVersion: slurm.V0041, Tokens: tokens, Timeout: 10 * time.Second, Metrics: restMetrics})
	}
	ctx := ctrl.SetupSignalHandler()
	must((&syncer.Clusters{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Slurm: factory, ClusterDomain: clusterDomain,
		PollInterval: poll, Metrics: syncMetrics,
	}).SetupWithManager(ctx, mgr))
	must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	must(mgr.AddReadyzCheck("readyz", healthz.Ping))
	log.Info("starting sunk-syncer", "pollInterval", poll)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func must(err error) {
	if err != nil {
		ctrl.Log.Error(err, "setup failed")
		os.Exit(1)
	}
}
