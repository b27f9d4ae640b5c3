// sunk-operator reconciles SlurmClusters and NodeSets.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/controller/nodeset"
	"sunk.dev/sunk/internal/controller/slurmcluster"
	"sunk.dev/sunk/internal/kube"
	sunkwebhook "sunk.dev/sunk/internal/webhook"
)

func main() {
	var metricsAddr, probeAddr, clusterDomain, certDir string
	var leaderElect, webhooks bool
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables it)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&clusterDomain, "cluster-domain", "cluster.local", "the Kubernetes cluster's DNS domain, used in slurm.conf host names")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so that several replicas can run")
	flag.BoolVar(&webhooks, "enable-webhooks", true, "serve the validating admission webhook")
	flag.StringVar(&certDir, "webhook-cert-dir", "", "directory with tls.crt and tls.key for the webhook server")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	must(clientgoscheme.AddToScheme(scheme))
	must(sunkv1.AddToScheme(scheme))

	cfg := ctrl.GetConfigOrDie()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "sunk-operator.sunk.dev",
		WebhookServer:          webhook.NewServer(webhook.Options{CertDir: certDir}),
	})
	must(err)
	execer, err := kube.NewPodExecer(cfg)
	must(err)
	must((&slurmcluster.Reconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), ClusterDomain: clusterDomain, Exec: execer,
	}).SetupWithManager(mgr))
	must((&nodeset.Reconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), ClusterDomain: clusterDomain,
	}).SetupWithManager(mgr))
	if webhooks {
		must(sunkwebhook.SetupSlurmClusterWebhook(mgr))
	}
	must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	must(mgr.AddReadyzCheck("readyz", healthz.Ping))
	if webhooks {
		// Ready only once the webhook serves: the API server rejects SlurmClusters until then.
		must(mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()))
	}
	log.Info("starting sunk-operator")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
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
