// Actions: creating, retiring (drain first, delete once idle) and releasing compute pods, and
// releasing the finalizers of pods whose NodeSet is gone.

package nodeset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"sunk.dev/sunk/internal/kube"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// applyServices keeps the ConfigMap of the NodeSet's s6 services, owned by the NodeSet.
func (r *Reconciler) applyServices(ctx context.Context, ns *sunkv1.NodeSet, n clusternames.Names) error {
	desired := render.ComputeServicesConfigMap(ns, n)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Namespace, Name: render.ComputeServicesName(ns.Name)}}
	if desired == nil {
		if err := r.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return client.IgnoreNotFound(err)
		}
		if metav1.IsControlledBy(cm, ns) {
			return client.IgnoreNotFound(r.Delete(ctx, cm))
		}
		return nil
	}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		if cm.UID != "" && !metav1.IsControlledBy(cm, ns) {
			return fmt.Errorf("ConfigMap %s exists and is not owned by NodeSet %s: refusing to take it over", cm.Name, ns.Name)
		}
		cm.Labels, cm.Data = desired.Labels, desired.Data
		return controllerutil.SetControllerReference(ns, cm, r.Scheme)
	})
	return err
}

// applyDisruptionBudget keeps the NodeSet's PodDisruptionBudget as rendered.
func (r *Reconciler) applyDisruptionBudget(ctx context.Context, ns *sunkv1.NodeSet, n clusternames.Names) error {
	desired := render.ComputeDisruptionBudget(ns, n)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: desired.Namespace, Name: desired.Name}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, pdb, func() error {
		if pdb.UID != "" && !metav1.IsControlledBy(pdb, ns) {
			return fmt.Errorf("PodDisruptionBudget %s exists and is not owned by NodeSet %s: refusing to take it over", pdb.Name, ns.Name)
		}
		pdb.Labels, pdb.Spec = desired.Labels, desired.Spec
		return controllerutil.SetControllerReference(ns, pdb, r.Scheme)
	})
	return err
}

// outcome collects what the actions could not finish, for the conditions and the requeue.
type outcome struct {
	waitingForJobs []string // members whose Slurm node still runs jobs
	waiting        []string // members waiting for something else (Slurm, kubelet)
	held           []string // members whose pod may not be created yet (world.createWait)
	slurmErrs      []string
	retiring       int
}

// act carries out one action.
func (r *Reconciler) act(ctx context.Context, w *world, a action, o *outcome, st *status) error {
	switch a.kind {
	case actCreate:
		return r.create(ctx, w, a.m, st)
	case actRetire:
		o.retiring++
		return r.retire(ctx, w, a.m, a.reason, o)
	case actResume:
		if err := w.sl.UpdateNode(ctx, a.m.name, slurm.NodeUpdate{State: slurm.NodeStateResume}); err != nil {
			o.slurmErrs = append(o.slurmErrs, fmt.Sprintf("resuming %s: %v", a.m.name, err))
			return nil
		}
		r.event(w.ns, corev1.EventTypeNormal, sunkv1.ReasonResumed, "resumed Slurm node %s (was drained: %s)", a.m.name, a.m.slurm.Reason)
		a.m.slurm.State = slices.DeleteFunc(slices.Clone(a.m.slurm.State), func(s string) bool { return s == "DRAIN" })
		return nil
	case actRelease:
		return r.release(ctx, w.ns, w.order, w.sl, w.slurmErr, a.m, o)
	case actHold:
		o.held = append(o.held, a.m.name)
		return nil
	}
	return fmt.Errorf("unknown action %d", a.kind)
}

func (r *Reconciler) create(ctx context.Context, w *world, m *member, st *status) error {
	cm := render.ComputeMember{Name: m.name, NodeName: m.node}
	var nodeLabels map[string]string // nil in Replicas mode: the node is not known yet
	if n := w.nodes[m.node]; m.node != "" && n != nil {
		nodeLabels = n.Labels
	}
	typ, err := render.MemberGPUType(w.ns, nodeLabels)
	if err != nil {
		r.event(w.ns, corev1.EventTypeWarning, sunkv1.ReasonGPUTypeUnusable, "pod %s gets untyped GPUs: %v", m.name, err)
	}
	cm.GPUType = typ
	cm.Topology = r.registrationTopology(ctx, w, m)
	pod := render.ComputePod(w.ns, w.sc, w.names, cm)
	if err := controllerutil.SetControllerReference(w.ns, pod, r.Scheme); err != nil {
		return err
	}
	err = r.Create(ctx, pod)
	switch {
	case err == nil:
		r.event(w.ns, corev1.EventTypeNormal, sunkv1.ReasonPodCreated, "created pod %s", pod.Name)
		m.pod = pod
		return nil
	case apierrors.IsAlreadyExists(err):
		// Our own pod the cache has not shown yet, or someone else's.
		existing := &corev1.Pod{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(pod), existing); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !metav1.IsControlledBy(existing, w.ns) {
			st.conflicts = append(st.conflicts, fmt.Sprintf("pod %s exists and belongs to another owner", pod.Name))
		}
		return nil
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace is being deleted and the NodeSet goes with it: retrying the create
		// every few seconds until then only fills the log with errors.
		return nil
	}
	return fmt.Errorf("creating pod %s: %w", pod.Name, err)
}

// retire takes a member's pod away the protected way. The pod is deleted only when a fresh
// read says its Slurm node is drained and runs no job, or that Slurm has no such node and
// either the pod is not Ready or every read for unregisteredGrace said the same (a Ready pod
// is normally a registered node, so one "no such node" is not trusted; but a slurmd whose
// record slurmctld lost stays Ready while it fails to register, and would hold the retirement
// for ever). A pod that never ran on a node has no slurmd and goes at once. Every Slurm error
// stops here.
func (r *Reconciler) retire(ctx context.Context, w *world, m *member, reason string, o *outcome) error {
	p := m.pod
	if p.Spec.NodeName == "" {
		return r.deletePod(ctx, w.ns, p, "it never ran on a node ("+strings.TrimPrefix(reason, wellknown.DrainPrefixNodeSet+" ")+")")
	}
	if w.sl == nil {
		o.waiting = append(o.waiting, m.name)
		return nil
	}
	sn, err := w.sl.GetNode(ctx, m.name)
	if err == nil && !sn.Drained() {
		if err = w.sl.UpdateNode(ctx, m.name, slurm.NodeUpdate{State: slurm.NodeStateDrain, Reason: &reason}); err == nil {
			r.event(w.ns, corev1.EventTypeNormal, sunkv1.ReasonDrained, "drained Slurm node %s: %s", m.name, reason)
			sn, err = w.sl.GetNode(ctx, m.name)
		}
	}
	switch {
	case errors.Is(err, slurm.ErrNotFound) && !kube.PodReady(p):
		return r.deletePod(ctx, w.ns, p, "its Slurm node is not registered and the pod is not Ready")
	case errors.Is(err, slurm.ErrNotFound) && r.unregisteredFor(p, time.Now()) >= unregisteredGrace:
		return r.deletePod(ctx, w.ns, p, fmt.Sprintf("Slurm has had no node %s for over %s though the pod is Ready: its slurmd does not register", m.name, unregisteredGrace))
	case errors.Is(err, slurm.ErrNotFound):
		o.waiting = append(o.waiting, m.name)
		return nil
	}
	r.unregistered.Delete(p.UID)
	if err != nil {
		o.slurmErrs = append(o.slurmErrs, fmt.Sprintf("%s: %v", m.name, err))
		return nil
	}
	m.slurm = sn
	if !sn.Drained() {
		o.waiting = append(o.waiting, m.name)
		return nil
	}
	if sn.Busy() {
		o.waitingForJobs = append(o.waitingForJobs, m.name)
		return nil
	}
	return r.deletePod(ctx, w.ns, p, fmt.Sprintf("its Slurm node is drained (%s) and runs no job", sn.Reason))
}

// unregisteredGrace is how long every read must have found no Slurm node for a Ready pod
// before retire believes it: longer than a slurmd takes to register, and than slurmctld takes
// to recover its state after a restart.
const unregisteredGrace = 2 * time.Minute

// unregisteredFor is how long retire's reads have found no Slurm node for the pod, without a
// read in between that found one (or failed), as of now; the first such read starts the clock.
// It is kept in memory: an operator restart starts it again, the safe way.
func (r *Reconciler) unregisteredFor(p *corev1.Pod, now time.Time) time.Duration {
	since, _ := r.unregistered.LoadOrStore(p.UID, now)
	return now.Sub(since.(time.Time))
}

func (r *Reconciler) deletePod(ctx context.Context, ns *sunkv1.NodeSet, p *corev1.Pod, why string) error {
	uid := p.UID
	r.unregistered.Delete(uid)
	if err := r.Delete(ctx, p, client.Preconditions{UID: &uid}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("deleting pod %s: %w", p.Name, err)
	}
	r.event(ns, corev1.EventTypeNormal, sunkv1.ReasonPodDeleted, "deleted pod %s: %s", p.Name, why)
	return nil
}

// release lets a stopped pod go once its Slurm node record is removed: for a member gone
// for good, and for a replaced one too, because slurmctld applies a dynamic node's --conf
// (Features, CPUs, RealMemory, Weight) only when it creates the record; a new slurmd that
// finds its name registered is only checked against the old record. A replaced member's
// record stays when it carries a drain that no sunk component set (a person's, or Slurm's
// own), so that the reason survives the replacement; drains with the "k8s:" prefix are
// derived from Kubernetes state and set again by their owner when still due.
func (r *Reconciler) release(ctx context.Context, ns *sunkv1.NodeSet, order memberOrder, sl slurm.Client, slurmErr error, m *member, o *outcome) error {
	p := m.pod
	if p.Spec.NodeName == "" {
		return removeFinalizer(ctx, r.Client, p) // never ran: never registered
	}
	if going, err := kube.NamespaceTerminating(ctx, r.Client, p.Namespace); err != nil {
		return err
	} else if going {
		// The whole namespace goes, slurmctld with it: there is no record left to protect,
		// and waiting for an unreachable Slurm would hold the namespace forever.
		return removeFinalizer(ctx, r.Client, p)
	}
	if sl == nil {
		o.slurmErrs = append(o.slurmErrs, fmt.Sprintf("removing Slurm node %s: %v", m.name, slurmErr))
		return nil
	}
	// One read of the record, when this reconcile's node list cannot settle it or a replacement
	// needs it. A list without the record: it is gone already, typically removed by a release
	// whose finalizer patch lost a conflict and comes back here, and a second DELETE would
	// only make slurmctld and slurmrestd log an error (12 in a 5-minute soak); but the list may
	// be the node watchers' cache, a poll behind Slurm, and a record that registered meanwhile
	// must still go.
	if (m.listed && m.slurm == nil) || m.desired {
		n, err := sl.GetNode(ctx, m.name)
		switch {
		case errors.Is(err, slurm.ErrNotFound):
			return removeFinalizer(ctx, r.Client, p)
		case err != nil:
			o.slurmErrs = append(o.slurmErrs, fmt.Sprintf("reading Slurm node %s: %v", m.name, err))
			return nil
		case m.desired && n.Drained() && !wellknown.DrainBySunk(n.Reason):
			r.event(ns, corev1.EventTypeNormal, sunkv1.ReasonRecordKept, "kept Slurm node %s for its replacement: drained by someone else (%s)", m.name, n.Reason)
			return removeFinalizer(ctx, r.Client, p)
		}
	}
	if parked, err := r.park(ctx, ns, order, sl, m); err != nil {
		o.slurmErrs = append(o.slurmErrs, fmt.Sprintf("parking Slurm node %s: %v", m.name, err))
		return nil
	} else if parked {
		return removeFinalizer(ctx, r.Client, p)
	}
	why := "its pod is gone for good"
	if m.desired {
		why = "its replacement registers afresh with the current template"
	}
	if err := sl.DeleteNode(ctx, m.name); err != nil && !errors.Is(err, slurm.ErrNotFound) {
		o.slurmErrs = append(o.slurmErrs, fmt.Sprintf("removing Slurm node %s: %v", m.name, err))
		return nil
	} else if err == nil {
		r.event(ns, corev1.EventTypeNormal, sunkv1.ReasonRecordRemoved, "removed Slurm node %s: %s", m.name, why)
	}
	return removeFinalizer(ctx, r.Client, p)
}

// removeFinalizer patches a copy of p: p may be the operator cache's own object (candidates),
// into which the patch's answer must not be decoded.
func removeFinalizer(ctx context.Context, c client.Client, p *corev1.Pod) error {
	p = p.DeepCopy()
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	p.Finalizers = slices.DeleteFunc(slices.Clone(p.Finalizers), func(f string) bool { return f == wellknown.FinalizerSlurmNode })
	if err := c.Patch(ctx, p, patch); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing pod %s: %w", p.Name, err)
	}
	return nil
}

// releaseOrphans releases the stopped pods of a NodeSet that is gone or going: Slurm
// records are removed when the cluster still exists, and otherwise left with it.
func (r *Reconciler) releaseOrphans(ctx context.Context, namespace, name string) (ctrl.Result, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{wellknown.LabelNodeSet: name}); err != nil {
		return ctrl.Result{}, err
	}
	clients := map[string]slurm.Client{}
	var requeue bool
	for i := range pods.Items {
		p := &pods.Items[i]
		if !terminating(p) || !hasFinalizer(p) {
			continue
		}
		if !stopped(p) {
			requeue = true
			continue
		}
		var sl slurm.Client
		var slErr error
		cluster := p.Labels[wellknown.LabelCluster]
		sc := &sunkv1.SlurmCluster{}
		err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: cluster}, sc)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && clusterGoing(sc)):
			// The Slurm cluster goes too: nothing to remove the record from.
			if err := removeFinalizer(ctx, r.Client, p); err != nil {
				return ctrl.Result{}, err
			}
			continue
		case err != nil:
			return ctrl.Result{}, err
		}
		if sl = clients[cluster]; sl == nil {
			if sl, slErr = r.slurmClient(ctx, clusternames.For(sc, r.ClusterDomain), sc.Spec.RestAPI.Version); slErr == nil {
				clients[cluster] = sl
			}
		}
		o := &outcome{}
		if err := r.release(ctx, nil, memberOrder{}, sl, slErr, &member{name: p.Name, pod: p}, o); err != nil {
			return ctrl.Result{}, err
		}
		if len(o.slurmErrs) > 0 {
			requeue = true
			log.FromContext(ctx).Info("keeping a stopped compute pod until its Slurm node is removed", "pod", p.Name, "error", o.slurmErrs[0])
			if r.Recorder != nil {
				r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, sunkv1.ReasonRecordNotRemoved, "Release", "%s", o.slurmErrs[0])
			}
		}
	}
	if requeue {
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	return ctrl.Result{}, nil
}
