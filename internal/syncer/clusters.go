package syncer

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// +kubebuilder:rbac:groups=sunk.dev,resources=slurmclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=sunk.dev,resources=slurmclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch;update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch;update
// +kubebuilder:rbac:groups="",resources=secrets;services,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// The metrics filter (internal/metricsauth) asks the API server about each /metrics caller.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Clusters runs one Syncer for each SlurmCluster: it is a controller-runtime reconciler (started
// after leader election, like the Syncers it starts) and a Runnable that holds their lifetime.
type Clusters struct {
	Client client.Client
	// APIReader reads the JWT Secret and the REST Service past the cache (neither is cached
	// cluster-wide for the sake of one read per cluster), and checks a pod is really gone.
	APIReader client.Reader
	// Slurm holds the REST client of each cluster; a Syncer runs on the client the pool gave
	// it and is restarted when the pool's client changes (new endpoint or key).
	Slurm         *slurmconn.Pool
	ClusterDomain string
	PollInterval  time.Duration
	Metrics       *Metrics
	Recorder      events.EventRecorder

	// NotReadyGrace and DrainBudgetPercent go to every Syncer's Config (zero: defaults).
	NotReadyGrace      time.Duration
	DrainBudgetPercent int
	// Workers per cluster (zero: DefaultWorkers).
	Workers int
	mgr     ctrl.Manager
	mu      sync.Mutex
	base    context.Context
	running map[types.NamespacedName]runningSyncer
}

// runningSyncer is a started Syncer: how to stop it, the client it runs on, and whether it
// reads Slurm's node state through the node watchers.
type runningSyncer struct {
	stop    context.CancelFunc
	slurm   slurm.Client
	watcher bool
	syncer  *Syncer
}

// recheckEndpoint is how often a running Syncer's cluster is looked at again for a changed
// REST endpoint or key: neither the Service nor the Secret is watched.
const recheckEndpoint = 30 * time.Second

// SetupWithManager registers the reconciler, the runnable and the pod index.
func (c *Clusters) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	c.mgr = mgr
	c.running = map[types.NamespacedName]runningSyncer{}
	if c.Slurm == nil {
		c.Slurm = slurmconn.New(slurmconn.Options{Reader: c.APIReader})
	}
	if c.Recorder == nil {
		c.Recorder = mgr.GetEventRecorder("sunk-syncer")
	}
	if err := IndexPodsByNode(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := mgr.Add(c); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("syncer").For(&sunkv1.SlurmCluster{}).Complete(c)
}

// Start holds the Syncers' lifetime: they stop when the manager (or leadership) ends.
func (c *Clusters) Start(ctx context.Context) error {
	c.mu.Lock()
	c.base = ctx
	c.mu.Unlock()
	<-ctx.Done()
	return nil
}

// NeedLeaderElection: only the leader syncs.
func (c *Clusters) NeedLeaderElection() bool { return true }

// Reconcile starts a SlurmCluster's Syncer once its REST Service and JWT key exist, restarts it
// when they change, and stops it (dropping its client and metric series) when the cluster goes.
func (c *Clusters) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := req.NamespacedName
	c.mu.Lock()
	base, run, running := c.base, c.running[key], c.running[key].stop != nil
	c.mu.Unlock()
	if base == nil {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	sc := &sunkv1.SlurmCluster{}
	// A cluster being deleted is synced while it waits for its NodeSets' jobs
	// (FinalizerClusterDrain): their pods still need their nodes drained and released.
	if err := c.Client.Get(ctx, key, sc); err != nil || (!sc.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(sc, wellknown.FinalizerClusterDrain)) {
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		if running {
			c.stop(key)
			log.FromContext(ctx).Info("stopped syncing: the SlurmCluster is gone", "cluster", key)
		}
		c.Slurm.Forget(key)
		c.Metrics.Forget(key.Namespace, key.Name)
		return ctrl.Result{}, nil
	}
	sl, err := c.Slurm.For(ctx, clusternames.For(sc, c.ClusterDomain), sc.Spec.RestAPI.Version)
	if err != nil {
		if running {
			// Keep syncing on the client we have: a Service or Secret read that failed
			// says nothing about slurmrestd, and the Syncer fails closed on its own.
			return ctrl.Result{RequeueAfter: recheckEndpoint}, nil
		}
		// The operator has not made the Service or the key yet.
		log.FromContext(ctx).Info("not syncing yet", "cluster", key, "why", err.Error())
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	watcher := sc.Spec.Controller.NodeWatcher
	if running && run.slurm == sl && run.watcher == watcher {
		return ctrl.Result{RequeueAfter: recheckEndpoint}, nil
	}
	if running {
		c.stop(key)
		log.FromContext(ctx).Info("restarting the syncer: slurmrestd's endpoint or key, or spec.controller.nodeWatcher, changed", "cluster", key)
	}
	changes, err := c.nodeChanges(ctx, sc)
	source := "slurmrestd's node list"
	if watcher {
		source = "the node watchers"
	}
	if err != nil {
		// The operator has not made the Service yet.
		log.FromContext(ctx).Info("not syncing yet", "cluster", key, "why", err.Error())
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	s := New(Config{
		Namespace: sc.Namespace, Cluster: sc.Name, Slurm: sl, NodeChanges: changes, PollInterval: c.PollInterval,
		NotReadyGrace: c.NotReadyGrace, DrainBudgetPercent: c.DrainBudgetPercent, Workers: c.Workers,
		Metrics: c.Metrics, Recorder: c.Recorder,
		OnHealth: func(ctx context.Context, err error) { c.reportHealth(ctx, key, source, err) },
	}, c.Client, c.mgr.GetCache(), c.APIReader)
	sctx, stop := context.WithCancel(base)
	c.mu.Lock()
	c.running[key] = runningSyncer{stop: stop, slurm: sl, watcher: watcher, syncer: s}
	c.mu.Unlock()
	go func() {
		if err := s.Run(log.IntoContext(sctx, log.FromContext(ctx))); err != nil && sctx.Err() == nil {
			log.FromContext(ctx).Error(err, "syncer stopped", "cluster", key)
		}
	}()
	log.FromContext(ctx).Info("syncing", "cluster", key)
	return ctrl.Result{RequeueAfter: recheckEndpoint}, nil
}

// nodeChanges is where a cluster's Syncer reads Slurm's node state: with
// spec.controller.nodeWatcher, the node watchers beside its slurmctld pods
// (slurmconn.Pool.NodeWatcher); otherwise nil, which polls slurmrestd's node list (docs/syncer.md).
func (c *Clusters) nodeChanges(ctx context.Context, sc *sunkv1.SlurmCluster) (slurm.NodeChangeSource, error) {
	if !sc.Spec.Controller.NodeWatcher {
		return nil, nil
	}
	return c.Slurm.NodeWatcher(ctx, clusternames.For(sc, c.ClusterDomain))
}

func (c *Clusters) stop(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.running[key]; r.stop != nil {
		r.stop()
	}
	delete(c.running, key)
}

// reportHealth sets the SlurmCluster's NodesSynced condition, naming where Slurm's node state
// is read (source); the operator keeps conditions it does not own.
func (c *Clusters) reportHealth(ctx context.Context, key types.NamespacedName, source string, readErr error) {
	cond := metav1.Condition{Type: sunkv1.ConditionNodesSynced, Status: metav1.ConditionTrue, Reason: sunkv1.ReasonInSync,
		Message: "Slurm node state is readable through " + source + "; Kubernetes and Slurm are kept in agreement"}
	if readErr != nil {
		cond.Status, cond.Reason = metav1.ConditionFalse, sunkv1.ReasonSlurmUnreadable
		cond.Message = "changing nothing until Slurm's node state can be read: " + readErr.Error()
	}
	for range 5 {
		sc := &sunkv1.SlurmCluster{}
		if err := c.APIReader.Get(ctx, key, sc); err != nil {
			return
		}
		cond.ObservedGeneration = sc.Generation
		patch := client.MergeFromWithOptions(sc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		// A new cluster's first report, before Slurm ever answered, is no warning: the
		// condition says it; a warning is for a cluster that was read and no longer is.
		first := meta.FindStatusCondition(sc.Status.Conditions, sunkv1.ConditionNodesSynced) == nil
		if !meta.SetStatusCondition(&sc.Status.Conditions, cond) {
			return
		}
		if err := c.Client.Status().Patch(ctx, sc, patch); err == nil {
			if readErr != nil && !first && c.Recorder != nil {
				c.Recorder.Eventf(sc, nil, "Warning", sunkv1.ReasonSlurmUnreadable, "Sync", "%s", cond.Message)
			}
			return
		}
	}
}
