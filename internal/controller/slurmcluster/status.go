package slurmcluster

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
)

// status collects what one reconcile observed; updateStatus writes it once.
type status struct {
	generation int64
	conditions []metav1.Condition
	configHash string
	endpoints  sunkv1.ClusterEndpoints
	topology   *sunkv1.TopologyStatus
}

func newStatus(sc *sunkv1.SlurmCluster) *status {
	return &status{
		generation: sc.Generation,
		conditions: append([]metav1.Condition(nil), sc.Status.Conditions...),
		configHash: sc.Status.ConfigHash,
		endpoints:  sc.Status.Endpoints,
		topology:   sc.Status.Topology,
	}
}

// applied records that slurmctld runs cfg, whether its gres.conf has the device Include and
// whether its plugstack.conf loads the containers plugin: all describe the running
// configuration, and change only together.
func (s *status) applied(cfg *render.Config) {
	s.configHash = cfg.Hash
	s.set(sunkv1.ConditionConfigApplied, true, sunkv1.ReasonApplied, "slurmctld runs configuration "+cfg.Hash)
	if cfg.GPUDevices {
		s.set(sunkv1.ConditionGPUDevicesIncluded, true, sunkv1.ReasonApplied,
			"slurmctld runs configuration "+cfg.Hash+", whose gres.conf includes each compute pod's GPU device lines")
	} else {
		s.set(sunkv1.ConditionGPUDevicesIncluded, false, sunkv1.ReasonNoGPUs,
			"slurmctld runs configuration "+cfg.Hash+", whose gres.conf has no device Include: no NodeSet of the cluster grants GPUs")
	}
	if cfg.Containers {
		s.set(sunkv1.ConditionContainersEnabled, true, sunkv1.ReasonApplied,
			"slurmctld runs configuration "+cfg.Hash+", whose plugstack.conf loads the containers plugin")
	} else {
		s.set(sunkv1.ConditionContainersEnabled, false, sunkv1.ReasonNoContainers,
			"slurmctld runs configuration "+cfg.Hash+", whose plugstack.conf has no containers plugin: no NodeSet of the cluster enables containers")
	}
}

func (s *status) set(typ string, ok bool, reason, msg string) {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: s.generation}
	if ok {
		c.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.conditions, c)
}

// observeWorkloads turns the workloads' readiness into conditions and endpoints; slurmctld's
// is observeController's (failover.go).
func (r *Reconciler) observeWorkloads(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, st *status) error {
	st.endpoints.Controller = fmt.Sprintf("%s:%d", n.ControllerAddr(0, render.Controllers(sc)), clusternames.SlurmctldPort)

	rest := &appsv1.Deployment{}
	if err := r.get(ctx, n, n.RestAPI, rest); err != nil {
		return err
	}
	availableCondition(st, sunkv1.ConditionRestAPIReady, "slurmrestd", rest.Status.AvailableReplicas, 1)
	st.endpoints.RestAPI = fmt.Sprintf("%s://%s:%d", n.Scheme(), n.ServiceHost(n.RestAPI), clusternames.SlurmrestdPort)

	login := &appsv1.StatefulSet{}
	if err := r.get(ctx, n, n.Login, login); err != nil {
		return err
	}
	if want := ptr.Deref(sc.Spec.Login.Replicas, 1); want == 0 {
		st.set(sunkv1.ConditionLoginReady, true, sunkv1.ReasonDisabled, "spec.login.replicas is 0")
	} else {
		availableCondition(st, sunkv1.ConditionLoginReady, "login", login.Status.AvailableReplicas, want)
	}
	st.endpoints.Login = ""
	if render.SSHEnabled(sc) {
		st.endpoints.Login = fmt.Sprintf("%s:%d", n.ServiceHost(n.Login), clusternames.SSHPort)
	}

	switch sc.Spec.Accounting.Mode {
	case sunkv1.AccountingManaged, sunkv1.AccountingExternal:
		dbd := &appsv1.StatefulSet{}
		if err := r.get(ctx, n, n.Accounting, dbd); err != nil {
			return err
		}
		notReady := ""
		if dbd.Status.ReadyReplicas < 1 {
			notReady = "slurmdbd is not ready"
		}
		if sc.Spec.Accounting.Mode == sunkv1.AccountingManaged {
			db := &appsv1.StatefulSet{}
			if err := r.get(ctx, n, n.Database, db); err != nil {
				return err
			}
			if db.Status.ReadyReplicas < 1 {
				notReady = "the managed database is not ready"
			}
		}
		if notReady == "" {
			st.set(sunkv1.ConditionAccountingReady, true, sunkv1.ReasonReady, "slurmdbd is ready")
		} else {
			st.set(sunkv1.ConditionAccountingReady, false, sunkv1.ReasonNotReady, notReady)
		}
	default:
		st.set(sunkv1.ConditionAccountingReady, true, sunkv1.ReasonDisabled, "spec.accounting.mode is None")
	}
	return nil
}

// get reads an object of the cluster; a missing object reads as the zero value, which
// the conditions report as not ready.
func (r *Reconciler) get(ctx context.Context, n clusternames.Names, name string, o client.Object) error {
	return client.IgnoreNotFound(r.Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: name}, o))
}

// availableCondition: a workload serves once one of its pods is available.
func availableCondition(st *status, typ, what string, available, want int32) {
	if available >= 1 {
		st.set(typ, true, sunkv1.ReasonReady, fmt.Sprintf("%d of %d %s pods available", available, want, what))
		return
	}
	st.set(typ, false, sunkv1.ReasonNotReady, fmt.Sprintf("0 of %d %s pods available", want, what))
}

// podProblem says why a pod is not ready, from its container states.
func podProblem(p *corev1.Pod, what string) string {
	if p.Name == "" {
		return what + " pod does not exist yet"
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			return fmt.Sprintf("%s container is waiting: %s %s", what, w.Reason, w.Message)
		}
		if cs.RestartCount > 0 && cs.LastTerminationState.Terminated != nil {
			t := cs.LastTerminationState.Terminated
			return fmt.Sprintf("%s restarted %d times, last exit %d (%s)", what, cs.RestartCount, t.ExitCode, t.Reason)
		}
	}
	return fmt.Sprintf("%s pod is %s and not ready", what, p.Status.Phase)
}

// updateStatus writes the status when it changed, with Ready summarising the others.
func (r *Reconciler) updateStatus(ctx context.Context, sc *sunkv1.SlurmCluster, st *status) error {
	var notReady []string
	for _, t := range []string{sunkv1.ConditionControllerReady, sunkv1.ConditionRestAPIReady, sunkv1.ConditionAccountingReady, sunkv1.ConditionLoginReady, sunkv1.ConditionConfigApplied} {
		if !meta.IsStatusConditionTrue(st.conditions, t) {
			notReady = append(notReady, t)
		}
	}
	ctld := meta.FindStatusCondition(st.conditions, sunkv1.ConditionControllerReady)
	switch {
	case len(notReady) == 0 && ctld.Reason == sunkv1.ReasonBackupInCharge:
		// The cluster serves, but on its spare: Ready's reason (kubectl get's column) says so.
		st.set(sunkv1.ConditionReady, true, sunkv1.ReasonBackupInCharge, "every component serves, but on the backup slurmctld: "+ctld.Message)
	case len(notReady) == 0:
		st.set(sunkv1.ConditionReady, true, sunkv1.ReasonReady, "every component is ready and runs the current configuration")
	default:
		reason := sunkv1.ReasonComponentsNotReady
		if c := meta.FindStatusCondition(st.conditions, sunkv1.ConditionConfigApplied); c != nil && c.Status == metav1.ConditionFalse && len(notReady) == 1 {
			reason = c.Reason
		}
		st.set(sunkv1.ConditionReady, false, reason, "not yet: "+strings.Join(notReady, ", "))
	}
	next := sunkv1.SlurmClusterStatus{
		ObservedGeneration: sc.Generation,
		Conditions:         st.conditions,
		ClusterName:        sc.SlurmName(),
		Endpoints:          st.endpoints,
		ConfigHash:         st.configHash,
		Topology:           st.topology,
	}
	if equality.Semantic.DeepEqual(sc.Status, next) {
		r.Metrics.observe(client.ObjectKeyFromObject(sc), next.Conditions)
		return nil
	}
	// Optimistic lock: the conditions list is replaced whole, and another writer's
	// condition (sunk-syncer's NodesSynced) must not be lost to a stale cache.
	patch := client.MergeFromWithOptions(sc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	sc.Status = next
	if err := r.Status().Patch(ctx, sc, patch); err != nil {
		// The series say what the status says: a write that failed is retried, and
		// exported, by the next reconcile.
		return err
	}
	r.Metrics.observe(client.ObjectKeyFromObject(sc), next.Conditions)
	return nil
}
