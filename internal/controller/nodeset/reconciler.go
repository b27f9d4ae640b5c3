// Package nodeset reconciles NodeSets: compute pods that run slurmd as dynamic Slurm nodes,
// one per selected Kubernetes node (PerNode) or a number of them (Replicas). Every change
// that takes a Slurm node away (scale-in, an update, a node leaving the selection) is
// protected: drain in Slurm, wait until no job runs, and only then delete the pod. A Slurm
// answer that is not a clean success stops all of that: nothing is read as idle or drained
// that Slurm did not say is.
package nodeset

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/internal/slurmversion"
	"sunk.dev/sunk/internal/validation"
	"sunk.dev/sunk/pkg/slurm"
)

// Reconciler reconciles NodeSets.
type Reconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// ClusterDomain is the Kubernetes cluster's DNS domain (cluster.local).
	ClusterDomain string
	// Slurm holds the process's REST client per cluster, shared with the SlurmCluster
	// controller; a Pool of its own when nil.
	Slurm *slurmconn.Pool
	// APIReader reads what the operator's cache does not hold (an admin's unlabelled
	// Secrets); the manager's when nil.
	APIReader client.Reader
	// Images are the operator's Slurm image per release (--slurm-images): a compute pod runs
	// the NodeSet's image, else the cluster's spec.image, else this image of the cluster's
	// release.
	Images slurmversion.Images
	// PollInterval is how soon Slurm is read again while the NodeSet waits on it (a job to
	// end, a drain to be lifted); 5s when zero. Slurm has no watch to wake the controller.
	PollInterval time.Duration
	// Metrics are the autoscaler's (metrics.go); none when nil.
	Metrics *Metrics
	// ResyncInterval refreshes the Slurm half of the status when nothing is pending; 60s
	// when zero.
	ResyncInterval time.Duration

	// unregistered: when retire first found no Slurm node for a Ready pod, by pod UID
	// (unregisteredFor).
	unregistered sync.Map
}

const (
	defaultPollInterval     = 5 * time.Second
	defaultResyncInterval   = 60 * time.Second
	maxMessageItems         = 5
	conditionMessageMaxSize = 1024
)

// NodeSets are patched for their drain finalizer only, their status with merge patches;
// nodesets/finalizers lets the compute pods' owner references block the NodeSet's deletion.
// +kubebuilder:rbac:groups=sunk.dev,resources=nodesets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=sunk.dev,resources=nodesets/status,verbs=patch
// +kubebuilder:rbac:groups=sunk.dev,resources=nodesets/finalizers,verbs=update
// +kubebuilder:rbac:groups=sunk.dev,resources=slurmclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets;services,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// Budgets go with their NodeSet through owner references; the controller never deletes one.
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch

// Reconcile walks the steps in order; each returns early when it cannot go on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := &sunkv1.NodeSet{}
	if err := r.Get(ctx, req.NamespacedName, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return r.releaseOrphans(ctx, req.Namespace, req.Name)
		}
		return ctrl.Result{}, err
	}
	if !ns.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, ns)
	}
	if added, err := r.addFinalizer(ctx, ns); err != nil || added {
		return ctrl.Result{}, err // the patch's watch event brings the next reconcile
	}
	return r.reconcileAndReport(ctx, ns)
}

// reconcileAndReport runs the steps and writes what they observed to the status.
func (r *Reconciler) reconcileAndReport(ctx context.Context, ns *sunkv1.NodeSet) (ctrl.Result, error) {
	st := newStatus(ns)
	result, err := r.reconcile(ctx, ns, st)
	if uerr := r.updateStatus(ctx, ns, st); uerr != nil && err == nil {
		err = uerr
	}
	return kube.QuietConflict(result, err)
}

// world is what one reconcile knows about a NodeSet.
type world struct {
	ns      *sunkv1.NodeSet
	sc      *sunkv1.SlurmCluster
	names   clusternames.Names
	hash    string
	sel     *selection
	nodes   map[string]*corev1.Node
	members []*member // by name
	// pods are the pods with the NodeSet's label: owned (by name) and foreign ones.
	pods    corev1.PodList
	owned   map[string]*corev1.Pod
	foreign []*corev1.Pod
	// selected are the Kubernetes nodes the NodeSet selects, by name; held those of them an
	// older PerNode NodeSet holds (node -> that NodeSet).
	selected []string
	held     map[string]string
	// order is the order spec.replicas takes members in; orderConflicts what ordering them
	// found (PerNode: held nodes, member names two nodes share).
	order          memberOrder
	orderConflicts []string
	sl             slurm.Client
	// slurmErr is why Slurm could not be read (nil: the node list was read).
	slurmErr error
	// autoscaleErr is why the autoscaler could not read Slurm, and changed nothing.
	autoscaleErr error
	// slurmNodes is the cluster's node table as the autoscaler read it in this reconcile
	// (slurmconn.Pool.Nodes, FUTURE records too), which readSlurm uses instead of reading it
	// again when slurmNodesRead: one read of the table per reconcile.
	slurmNodes     []slurm.Node
	slurmNodesRead bool
	// createWait is why no pod may be created yet ("" when they may: createWait), and
	// createWaitReason its reason.
	createWait, createWaitReason string
	// runningTopology is the topology.yaml slurmctld runs ("" when not known), read once
	// topologyRead, for the Topology= of new pods (registrationTopology).
	runningTopology string
	topologyRead    bool
}

func (r *Reconciler) reconcile(ctx context.Context, ns *sunkv1.NodeSet, st *status) (ctrl.Result, error) {
	w := &world{ns: ns}

	// 0. A spec the webhook would reject never reaches slurmd, even without the webhook. (A
	// deleted NodeSet only retires pods, which needs no valid spec.)
	if errs := validation.ValidateNodeSetSpec(&ns.Spec, field.NewPath("spec")); len(errs) > 0 && ns.DeletionTimestamp.IsZero() {
		msg := errs.ToAggregate().Error()
		r.event(ns, corev1.EventTypeWarning, sunkv1.ReasonInvalidSpec, "%s", msg)
		st.set(sunkv1.ConditionReady, false, sunkv1.ReasonInvalidSpec, msg)
		return ctrl.Result{}, nil
	}

	// 1. The SlurmCluster. Without it nothing is created, drained or deleted.
	sc := &sunkv1.SlurmCluster{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns.Namespace, Name: ns.Spec.ClusterRef}, sc); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		st.set(sunkv1.ConditionReady, false, sunkv1.ReasonClusterNotFound, fmt.Sprintf("SlurmCluster %s does not exist", ns.Spec.ClusterRef))
		return ctrl.Result{}, nil
	}
	if clusterGoing(sc) {
		st.set(sunkv1.ConditionReady, false, sunkv1.ReasonClusterNotFound, fmt.Sprintf("SlurmCluster %s is being deleted", ns.Spec.ClusterRef))
		return ctrl.Result{}, nil
	}
	if ns.Spec.Image == "" {
		resolved, err := r.Images.Resolve(sc)
		if err != nil {
			st.set(sunkv1.ConditionReady, false, sunkv1.ReasonNoImage, err.Error())
			return ctrl.Result{}, nil
		}
		sc = resolved
	}
	// 1b. An upgrade moves compute pods only once slurmctld runs the new release.
	sc, held, err := r.computeRelease(ctx, ns, sc)
	if err != nil {
		return ctrl.Result{}, err
	}
	w.sc, w.names = sc, clusternames.For(sc, r.ClusterDomain)
	w.createWaitReason, w.createWait = createWait(ns, sc)
	w.hash = render.ComputeTemplateHash(ns, sc, w.names)
	st.hash = w.hash
	st.selector = labels.SelectorFromSet(render.ComputeSelectorLabels(w.names, ns.Name)).String()

	// 2. The selection: which Kubernetes nodes the NodeSet may use.
	sel, err := newSelection(ns)
	if err != nil {
		st.set(sunkv1.ConditionReady, false, sunkv1.ReasonInvalidSpec, err.Error())
		return ctrl.Result{}, nil
	}
	w.sel = sel

	// 2b. The Secrets the jobs' containers pull with: a missing one is named (its pods
	// would wait in ContainerCreating without a word from sunk), and looked for again.
	recheck, err := r.checkCredentials(ctx, ns, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Selection needs only labels and names: nodes are watched as metadata, which keeps
	// the cache small on clusters of thousands of nodes.
	nodeList := &metav1.PartialObjectMetadataList{}
	nodeList.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.List(ctx, nodeList); err != nil {
		return ctrl.Result{}, err
	}
	w.nodes = map[string]*corev1.Node{}
	for i := range nodeList.Items {
		w.nodes[nodeList.Items[i].Name] = &corev1.Node{ObjectMeta: nodeList.Items[i].ObjectMeta}
	}

	// 2c. The candidates: the NodeSet's pods, and the order spec.replicas takes members in.
	if err := r.candidates(ctx, w); err != nil {
		return ctrl.Result{}, err
	}

	// 2d. Autoscaling: Slurm's queue sets spec.replicas (autoscale.go).
	if err := r.autoscale(ctx, w, st); err != nil {
		return ctrl.Result{}, err
	}

	// 3. The members: those to run, and those whose pods still exist.
	r.members(w, st)

	// 4. Slurm: one list for every member's node. An error leaves every node unknown.
	r.readSlurm(ctx, w)

	// 5. The s6 services the pods mount, and the disruption budget that keeps evictions
	// off pods whose Slurm node may run a job.
	if err := r.applyServices(ctx, ns, w.names); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.applyDisruptionBudget(ctx, ns, w.names); err != nil {
		return ctrl.Result{}, err
	}

	// 6. Plan on the snapshot, then act: create, retire (drain, wait, delete), resume,
	// release. Every pod deletion is decided on a fresh read of its Slurm node.
	actions := plan(planInput{
		members:        w.members,
		outdated:       func(m *member) bool { return outdated(w, m) },
		strategy:       strategyOf(ns),
		maxUnavailable: maxUnavailable(ns, st.desired),
		slurmKnown:     w.slurmErr == nil,
		holdCreates:    w.createWait != "",
	})
	o := &outcome{}
	for _, a := range actions {
		if err := r.act(ctx, w, a, o, st); err != nil {
			return ctrl.Result{}, err
		}
	}

	// 7. Status: counts from both worlds, and what the NodeSet waits for.
	r.count(w, st)
	res := r.conclude(w, st, o)
	if recheck && (res.RequeueAfter == 0 || r.poll() < res.RequeueAfter) {
		res.RequeueAfter = r.poll()
	}
	if held || ns.Spec.Autoscaling != nil {
		// slurmctld's rollout, and Slurm's queue, are no events of this controller's: look again.
		if res.RequeueAfter == 0 || r.poll() < res.RequeueAfter {
			res.RequeueAfter = r.poll()
		}
	}
	return res, nil
}

func (r *Reconciler) poll() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return defaultPollInterval
}

func (r *Reconciler) resync() time.Duration {
	if r.ResyncInterval > 0 {
		return r.ResyncInterval
	}
	return defaultResyncInterval
}

func (r *Reconciler) event(ns *sunkv1.NodeSet, typ, reason, format string, args ...any) {
	if r.Recorder != nil && ns != nil {
		r.Recorder.Eventf(ns, nil, typ, reason, "Reconcile", format, args...)
	}
}

// SetupWithManager watches NodeSets, their pods and ConfigMaps, the NodeSets they share a
// cluster with (an older one holds contested nodes), Kubernetes nodes (which ones are
// selected) and SlurmClusters.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("sunk-operator")
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Slurm == nil {
		// The JWT key Secret may be an admin's, outside the operator's label-selected cache.
		r.Slurm = slurmconn.New(slurmconn.Options{Reader: kube.CacheThenAPIReader{Cache: mgr.GetClient(), API: mgr.GetAPIReader()}})
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&sunkv1.NodeSet{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&sunkv1.NodeSet{}, handler.EnqueueRequestsFromMapFunc(r.siblings),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(nodeMetadata(), handler.EnqueueRequestsFromMapFunc(r.allNodeSets),
			builder.OnlyMetadata, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&sunkv1.SlurmCluster{}, handler.EnqueueRequestsFromMapFunc(r.nodeSetsOfCluster)).
		Complete(r)
}

func nodeMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return m
}

func (r *Reconciler) requests(ctx context.Context, opts []client.ListOption, keep func(*sunkv1.NodeSet) bool) []ctrl.Request {
	var list sunkv1.NodeSetList
	if err := r.List(ctx, &list, opts...); err != nil {
		log.FromContext(ctx).Error(err, "listing NodeSets")
		return nil
	}
	var reqs []ctrl.Request
	for i := range list.Items {
		if keep(&list.Items[i]) {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

func (r *Reconciler) siblings(ctx context.Context, o client.Object) []ctrl.Request {
	ns, ok := o.(*sunkv1.NodeSet)
	if !ok {
		return nil
	}
	return r.requests(ctx, []client.ListOption{client.InNamespace(ns.Namespace)}, func(other *sunkv1.NodeSet) bool {
		return other.UID != ns.UID && other.Spec.ClusterRef == ns.Spec.ClusterRef
	})
}

func (r *Reconciler) allNodeSets(ctx context.Context, _ client.Object) []ctrl.Request {
	return r.requests(ctx, nil, func(*sunkv1.NodeSet) bool { return true })
}

func (r *Reconciler) nodeSetsOfCluster(ctx context.Context, o client.Object) []ctrl.Request {
	return r.requests(ctx, []client.ListOption{client.InNamespace(o.GetNamespace())}, func(ns *sunkv1.NodeSet) bool {
		return ns.Spec.ClusterRef == o.GetName()
	})
}
