// sunk-operator reconciles SlurmClusters and NodeSets.
package main

import (
	"flag"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"sunk.dev/sunk/internal/cmdutil"
	"sunk.dev/sunk/internal/controller/nodeset"
	"sunk.dev/sunk/internal/controller/slurmcluster"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/internal/slurmversion"
	"sunk.dev/sunk/internal/validation"
	sunkwebhook "sunk.dev/sunk/internal/webhook"
	"sunk.dev/sunk/pkg/slurm"
)

func main() {
	// First: this binary is also the Lua sandbox of job_submit.lua's check, re-executed
	// (internal/validation).
	validation.ServeLuaSandbox()
	var probeAddr, clusterDomain, certDir, allowedUnsafe, watchNamespaces, slurmImages string
	var authorUsers, authorGroups, authorImages string
	var sunkNamespace string
	var loginPoolPoll time.Duration
	var leaderElect, webhooks, slurmConfigCheck bool
	metricsOptions := cmdutil.MetricsFlags()
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&clusterDomain, "cluster-domain", "cluster.local", "the Kubernetes cluster's DNS domain, used in slurm.conf host names")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so that several replicas can run")
	flag.BoolVar(&webhooks, "enable-webhooks", true, "serve the admission webhooks (validating; defaulting spec.slurmVersion)")
	flag.StringVar(&certDir, "webhook-cert-dir", "", "directory with tls.crt and tls.key for the webhook server")
	flag.StringVar(&allowedUnsafe, "allowed-unsafe-conf-keys", "", "comma-separated slurm.conf keys sunk keeps (AuthType, SlurmctldPort...) that SlurmClusters may take over with spec.controller.unsafeConfKeys; * allows all; empty: none")
	flag.StringVar(&watchNamespaces, "watch-namespaces", "", "comma-separated namespaces whose SlurmClusters and NodeSets this operator manages; empty: all")
	flag.StringVar(&sunkNamespace, "sunk-namespace", cmdutil.OwnNamespace(), "the namespace of sunk's components (the syncer, sunk-scheduler), whose pods the SlurmClusters' NetworkPolicies admit to slurmrestd and the node watcher; default: the operator's own")
	flag.DurationVar(&loginPoolPoll, "login-pool-poll", slurmcluster.DefaultLoginPoolPoll, "how often the directory is read for the members of PerUser login pools (spec.login.pools)")
	flag.BoolVar(&slurmConfigCheck, "slurm-config-check", false, "have Slurm's own parser check each new configuration in a pod of the cluster's image before applying it")
	flag.StringVar(&slurmImages, "slurm-images", slurmversion.DefaultImagesFlag, "the Slurm image of each release, RELEASE=IMAGE[,...]: what SlurmClusters and NodeSets without an image of their own run")
	flag.StringVar(&authorUsers, "privileged-author-users", "", "comma-separated Kubernetes users who may set the SlurmCluster and NodeSet fields that give root on compute hosts (images, prolog, epilog, jobSubmitLua, services, sidecars, hostPath volumes)")
	flag.StringVar(&authorGroups, "privileged-author-groups", sunkwebhook.DefaultPrivilegedGroup, "comma-separated Kubernetes groups whose members may set those fields")
	flag.StringVar(&authorImages, "author-images", "", "comma-separated image patterns (path.Match) any author may name, beside the --slurm-images")
	leaseTimings := cmdutil.LeaderElectionFlags()
	log := cmdutil.ParseFlags()
	images, err := slurmversion.ParseImages(slurmImages)
	cmdutil.Must(err)
	rules := validation.Options{AllowedUnsafeConfKeys: cmdutil.CommaList(allowedUnsafe)}
	admission := sunkwebhook.Options{Validation: rules, Authors: sunkwebhook.Authors{
		Users: cmdutil.CommaList(authorUsers), Groups: cmdutil.CommaList(authorGroups), Images: cmdutil.CommaList(authorImages)}}
	// The releases' own images are the installer's choice already.
	for _, ref := range images {
		admission.Authors.Images = append(admission.Authors.Images, ref)
	}

	scheme := cmdutil.Scheme()

	cfg := ctrl.GetConfigOrDie()
	namespaces := cmdutil.WatchNamespaces(watchNamespaces)
	opts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsOptions(),
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "sunk-operator.sunk.dev",
		// main returns as soon as the manager stops, so the Lease can go at once: a rollout's
		// new pod leads within a second instead of after the lease duration.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhook.NewServer(webhook.Options{CertDir: certDir}),
		// Only the objects sunk labels are cached, not every Pod, Secret and ConfigMap of the
		// Kubernetes cluster; the reconcilers read the rest past the cache.
		Cache: cmdutil.OperatorCacheOptions(namespaces),
	}
	leaseTimings(&opts)
	mgr, err := ctrl.NewManager(cfg, opts)
	cmdutil.Must(err)
	execer, err := kube.NewPodExecer(cfg)
	cmdutil.Must(err)
	restMetrics, err := slurm.NewMetrics(crmetrics.Registry)
	cmdutil.Must(err)
	// One REST client per cluster for both controllers: a client per reconcile exhausted
	// slurmrestd's connections.
	// The JWT key Secret may be an admin's, which the label-selected cache does not hold.
	reader := kube.CacheThenAPIReader{Cache: mgr.GetClient(), API: mgr.GetAPIReader()}
	pool := slurmconn.New(slurmconn.Options{Reader: reader, Metrics: restMetrics})
	clusterMetrics, err := slurmcluster.NewMetrics(crmetrics.Registry)
	cmdutil.Must(err)
	clusters := &slurmcluster.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), ClusterDomain: clusterDomain, Exec: execer, Logs: execer, Slurm: pool,
		Validation: rules, SlurmConfigCheck: slurmConfigCheck, Namespaces: namespaces, Images: images,
		Metrics: clusterMetrics, SunkNamespace: sunkNamespace,
	}
	cmdutil.Must(clusters.SetupWithManager(mgr))
	cmdutil.Must((&slurmcluster.LoginPools{Reconciler: clusters, Poll: loginPoolPoll}).SetupWithManager(mgr))
	nodeSetMetrics, err := nodeset.NewMetrics(crmetrics.Registry)
	cmdutil.Must(err)
	cmdutil.Must((&nodeset.Reconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), ClusterDomain: clusterDomain, Slurm: pool, Images: images,
		Metrics: nodeSetMetrics,
	}).SetupWithManager(mgr))
	if webhooks {
		cmdutil.Must(sunkwebhook.SetupSlurmClusterWebhook(mgr, admission))
		cmdutil.Must(sunkwebhook.SetupNodeSetWebhook(mgr, admission))
	}
	cmdutil.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	cmdutil.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))
	if webhooks {
		// Ready only once the webhook serves: the API server rejects SlurmClusters until then.
		cmdutil.Must(mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()))
	}
	log.Info("starting sunk-operator", "allowedUnsafeConfKeys", rules.AllowedUnsafeConfKeys,
		"luaSandbox", validation.SandboxConfinement())
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
