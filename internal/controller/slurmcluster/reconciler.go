// Package slurmcluster reconciles SlurmCluster: keys, rendered configuration, the
// workloads of the control plane, configuration changes reaching slurmctld, and status.
package slurmcluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/internal/slurmversion"
	"sunk.dev/sunk/internal/validation"
	"sunk.dev/sunk/pkg/wellknown"
)

// Reconciler reconciles SlurmClusters.
type Reconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// ClusterDomain is the Kubernetes cluster's DNS domain (cluster.local).
	ClusterDomain string
	// Exec reads files inside slurmctld pods (which slurm.conf kubelet has delivered).
	Exec kube.Execer
	// Logs reads the containers' logs, where the pods show which auth key ring kubelet has
	// delivered (authrotation_step.go); without it no auth key rotation goes on.
	Logs kube.LogReader
	// Slurm holds the process's REST client per cluster (shared with the NodeSet controller);
	// a Pool reading through the manager's client when nil.
	Slurm *slurmconn.Pool
	// APIReader reads past the cache (the manager's API reader when nil): the operator's
	// cache holds only the objects it labels, and a prolog's ConfigMap, an admin's key
	// Secret or the external database's password Secret are someone else's.
	APIReader client.Reader
	// Validation are the operator's validation settings, the webhook's own: the controller
	// re-checks every spec with them before it renders anything.
	Validation validation.Options
	// SlurmConfigCheck has Slurm's own parser check each new configuration in a pod of the
	// cluster's image before it is applied (configcheck.go).
	SlurmConfigCheck bool
	// Images are the operator's Slurm image per release (--slurm-images), for clusters
	// without spec.image.
	Images slurmversion.Images
	// SunkNamespace is the namespace of sunk's components (the operator's own; the sunk chart
	// runs the syncer and sunk-scheduler there too), whose pods the cluster's NetworkPolicies
	// admit to slurmrestd and the node watcher. Empty: an operator outside the Kubernetes
	// cluster, which reaches the pods from a node.
	SunkNamespace string
	// Namespaces are the namespaces this operator manages (nil: all), as its manager's cache
	// has them: the metadata cache of script ConfigMaps (watches.go) must not see more.
	Namespaces map[string]cache.Config
	// Metrics exports each cluster's conditions (metrics.go); nil exports nothing.
	Metrics *Metrics

	// applied remembers the configuration each cluster's slurmctld was reconfigured with,
	// because the cached SlurmCluster a reconcile reads may predate its own status write,
	// and a second reconfigure is not free (slurmctld re-executes itself).
	applied sync.Map // types.UID -> config hash
	// jwt follows each cluster's JWT key rotations (jwtrotation.go).
	jwt sync.Map // types.UID -> *jwtState
	// authReconfigured is, per cluster, the reconfigure made for each auth key ring.
	authReconfigured sync.Map // types.UID -> *sync.Map of ring id -> authReconfigured
	// reconfigureFailed is each cluster's last failed reconfigure (reconfigure.go).
	reconfigureFailed sync.Map // types.UID -> reconfigureFailure

	// TopologySettle and TopologyMaxDelay debounce topology changes (topology.go); zero
	// means DefaultTopologySettle and DefaultTopologyMaxDelay.
	TopologySettle, TopologyMaxDelay time.Duration
	pendingTopologies                sync.Map // types.UID -> *pendingTopology

	// upgradeStep is, per cluster, the upgrade step last reported by an event (version.go).
	upgradeStep sync.Map // types.UID -> string

	// unsafeReported is the spec.controller.unsafeConfKeys use last reported per cluster.
	unsafeReported sync.Map // types.UID -> string

	// uids is each cluster's UID by name, so that a reconcile finding the cluster gone can
	// forget what the maps above hold for it (memory.go).
	uids sync.Map // types.NamespacedName -> types.UID
}

// pollWhileConverging is how soon to look again while waiting for something outside the
// API (kubelet refreshing a volume, a daemon starting) that no watch reports.
const pollWhileConverging = 3 * time.Second

// The cluster itself is only read; its status is written with merge patches.
// +kubebuilder:rbac:groups=sunk.dev,resources=slurmclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=sunk.dev,resources=slurmclusters/status,verbs=patch
// Keys, slurmdbd.conf and the state claim are created and updated, never deleted: owner
// references remove the Secrets with the cluster, and the claims outlive it on purpose.
// +kubebuilder:rbac:groups="",resources=configmaps;secrets;persistentvolumeclaims,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// The control plane's disruption budgets (render.ControlPlaneDisruptionBudgets).
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// Reading the first line of slurm.conf inside slurmctld's pod: whether kubelet has delivered
// the new configuration is visible nowhere else (docs/security.md).
// +kubebuilder:rbac:groups="",resources=pods/exec,verbs=get;create
// The metrics filter (internal/metricsauth) asks the API server who each /metrics caller is
// and whether it may get the path.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// Reading the Slurm containers' logs: the pods show there which auth key ring kubelet has
// delivered (authrotation_step.go).
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile walks the steps in order; each returns early when it cannot go on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sc := &sunkv1.SlurmCluster{}
	if err := r.Get(ctx, req.NamespacedName, sc); err != nil {
		if apierrors.IsNotFound(err) {
			r.Slurm.Forget(req.NamespacedName)
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.rememberUID(sc)
	if !sc.DeletionTimestamp.IsZero() {
		// Once finalize lets go, owner references remove everything but the keys, the
		// database password and the state and database claims, which outlive the cluster on
		// purpose: they hold the jobs and the accounting, and the keys let surviving pods and
		// a re-created cluster in.
		return r.finalize(ctx, sc)
	}
	if wrote, err := r.addFinalizer(ctx, sc); err != nil || wrote {
		return kube.QuietConflict(ctrl.Result{}, err) // a written finalizer brings the next event
	}
	st := newStatus(sc)
	result, err := r.reconcile(ctx, sc, st)
	if uerr := r.updateStatus(ctx, sc, st); uerr != nil && err == nil {
		err = uerr
	}
	return kube.QuietConflict(result, err)
}

func (r *Reconciler) reconcile(ctx context.Context, sc *sunkv1.SlurmCluster, st *status) (ctrl.Result, error) {
	n := clusternames.For(sc, r.ClusterDomain)

	// 1. A spec the webhook would reject never reaches Slurm, even without the webhook.
	if !r.validSpec(sc, st) {
		return ctrl.Result{}, nil
	}
	// 1b. The Slurm release: its image unless the spec names one, what it lacks, what runs.
	resolved, err := r.Images.Resolve(sc)
	if err != nil {
		r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonNoImage, err.Error())
		st.set(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonNoImage, err.Error())
		return ctrl.Result{}, nil
	}
	sc = resolved
	plan, err := r.observeVersion(ctx, sc, n, st)
	if err != nil {
		return ctrl.Result{}, err
	}

	// 2. Keys: generated when absent, never replaced.
	jwtKeys, err := r.ensureKeys(ctx, sc, n, st)
	if err != nil || jwtKeys == nil {
		return ctrl.Result{}, err
	}

	// 2b. The TLS Secret (spec.tls), which slurmrestd's and the watchers' pods mount.
	tlsWait, ok, err := r.ensureTLS(ctx, sc, n, st)
	if err != nil || !ok {
		return ctrl.Result{}, err
	}

	// 3. Configuration: scripts resolved, files rendered into ConfigMaps.
	in, err := r.resolveScripts(ctx, sc, n)
	if err != nil {
		var bad *scriptError
		if errors.As(err, &bad) {
			r.event(sc, corev1.EventTypeWarning, bad.reason, bad.msg)
			st.set(sunkv1.ConditionConfigApplied, false, bad.reason, bad.msg)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	// While an upgrade goes on, for the oldest release still running.
	features := slurmversion.FeaturesOf(plan.ConfVersion)
	in.TopologyYAML, in.QuiesceTimeout = features.TopologyYAML, features.QuiesceTimeout
	topology, topologyWait, err := r.topology(ctx, sc, n, in.TopologyYAML, features.TopologyStr, *jwtKeys, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	in.Topology = topology
	if err := r.clusterNodeSetConfig(ctx, sc, &in); err != nil {
		return ctrl.Result{}, err
	}
	cfg, err := render.RenderConfig(sc, in)
	if err != nil {
		return ctrl.Result{}, err
	}
	if ok, wait, err := r.slurmAccepts(ctx, sc, n, cfg, st); !ok || err != nil {
		return ctrl.Result{RequeueAfter: wait}, err
	}
	for _, cm := range render.ConfigMaps(n, cfg) {
		if err := r.apply(ctx, sc, cm); err != nil {
			return ctrl.Result{}, err
		}
	}

	// 4. Workloads.
	if err := r.applyWorkloads(ctx, sc, n, cfg, jwtKeys, plan); err != nil {
		return ctrl.Result{}, err
	}

	// 5. Status of the workloads, then the configuration reaching slurmctld.
	if err := r.observeWorkloads(ctx, sc, n, st); err != nil {
		return ctrl.Result{}, err
	}
	failoverWait, err := r.observeController(ctx, sc, n, *jwtKeys, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	result, err := r.applyConfigToController(ctx, sc, n, cfg, *jwtKeys, st)
	// 5b. Relabelled nodes moving by topology_str, once slurmctld runs the file (25.05+).
	var moveWait time.Duration
	if err == nil && features.TopologyStr {
		moveWait, err = r.moveByTopologyStr(ctx, sc, n, cfg, topology, *jwtKeys, st)
	}
	if err == nil && st.configHash == cfg.Hash {
		// 6. A rotated JWT key reaching slurmctld, once the configuration has.
		var rot ctrl.Result
		if rot, err = r.followJWTKey(ctx, sc, n, *jwtKeys); rot.RequeueAfter > 0 && (result.RequeueAfter == 0 || rot.RequeueAfter < result.RequeueAfter) {
			result.RequeueAfter = rot.RequeueAfter
		}
		// 7. The auth key ring, one round at a time, when an admin asked for a key.
		if err == nil {
			if rot, err = r.followAuthKey(ctx, sc, n, *jwtKeys, st); rot.RequeueAfter > 0 && (result.RequeueAfter == 0 || rot.RequeueAfter < result.RequeueAfter) {
				result.RequeueAfter = rot.RequeueAfter
			}
		}
	}
	// An upgrade's next step shows in workloads and pods that this controller may not watch.
	if plan.Upgrading && (result.RequeueAfter == 0 || pollWhileConverging < result.RequeueAfter) {
		result.RequeueAfter = pollWhileConverging
	}
	// A topology change that waits for the nodes to settle, nodes moving by topology_str,
	// and a failover, come back by themselves.
	for _, wait := range []time.Duration{topologyWait, moveWait, failoverWait, tlsWait} {
		if wait > 0 && (result.RequeueAfter == 0 || wait < result.RequeueAfter) {
			result.RequeueAfter = wait
		}
	}
	return result, err
}

// applyConfigToController makes slurmctld load the rendered configuration: once kubelet
// has delivered it into the pod, by a reconfigure over REST. Settings that only a restart
// applies roll the StatefulSet through its template's restart hash instead.
func (r *Reconciler) applyConfigToController(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, cfg *render.Config, jwtKeys slurmconn.Keys, st *status) (ctrl.Result, error) {
	if done, _ := r.applied.Load(sc.UID); sc.Status.ConfigHash == cfg.Hash || done == cfg.Hash {
		st.applied(cfg)
		return ctrl.Result{}, nil
	}
	pod := &corev1.Pod{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: n.ControllerPod(0)}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			st.set(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonWaitingForCtld, "slurmctld pod does not exist yet")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if pod.Annotations[wellknown.AnnotationRestartHash] != cfg.RestartHash {
		st.set(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonRollingRestart, "slurmctld restarts to apply settings that a reconfigure cannot")
		return ctrl.Result{RequeueAfter: pollWhileConverging}, nil
	}
	if !kube.PodReady(pod) {
		st.set(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonWaitingForCtld, "slurmctld is not ready")
		return ctrl.Result{}, nil
	}
	// Naming the wanted hash on the pod also makes kubelet resync its volumes now rather
	// than at its next periodic sync.
	if err := r.annotate(ctx, pod, wellknown.AnnotationConfigHash, cfg.Hash); err != nil {
		return ctrl.Result{}, err
	}
	first, err := r.Exec.Exec(ctx, n.Namespace, pod.Name, render.ControllerContainer, render.ConfigHashCommand()...)
	if err != nil {
		return ctrl.Result{}, err
	}
	if got := render.HashInSlurmConf(first); got != cfg.Hash {
		st.set(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonWaitingForKubelet,
			fmt.Sprintf("slurmctld's pod still sees configuration %q; waiting for kubelet to deliver %s", got, cfg.Hash))
		return ctrl.Result{RequeueAfter: pollWhileConverging}, nil
	}
	if !meta.IsStatusConditionTrue(st.conditions, sunkv1.ConditionRestAPIReady) {
		st.set(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonWaitingForRestAPI, "slurmrestd is not ready")
		return ctrl.Result{RequeueAfter: pollWhileConverging}, nil
	}
	sl, err := r.slurmFor(ctx, sc, n, jwtKeys)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reconfigure(ctx, sc, sl, "to apply configuration "+cfg.Hash); err != nil {
		reason := sunkv1.ReasonReconfigureFailed
		switch {
		case errors.Is(err, errRestNotReachable):
			reason = sunkv1.ReasonWaitingForRestAPI
		case errors.Is(err, errCtldNotReachable):
			reason = sunkv1.ReasonWaitingForCtld
		}
		st.set(sunkv1.ConditionConfigApplied, false, reason, err.Error())
		return ctrl.Result{RequeueAfter: pollWhileConverging}, nil
	}
	r.applied.Store(sc.UID, cfg.Hash)
	r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonReconfigured, "slurmctld reconfigured with configuration "+cfg.Hash)
	st.applied(cfg)
	return ctrl.Result{}, nil
}

func (r *Reconciler) event(sc *sunkv1.SlurmCluster, typ, reason, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(sc, nil, typ, reason, "Reconcile", "%s", msg)
	}
}
