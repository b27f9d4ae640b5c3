//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// autoscaledNodeSet shows a NodeSet that Slurm's queue sizes (spec.autoscaling), on a cluster
// another test built: new, both its nodes start once to register and are parked in Slurm
// (state FUTURE, no pod) once idle; a 2-node job sent to it at zero pends instead of being
// refused, the NodeSet grows to 2 at once, the job runs to completion, and the nodes go again
// after idleAfter. A second autoscaled NodeSet of the same partition, whose nodes lack the
// job's feature, stays parked throughout: the job asks only the NodeSet that could run it. The
// bench line gives pending → running and idle → parked.
func (e *operatorEnv) autoscaledNodeSet(t *testing.T, cluster, login string) {
	t.Helper()
	const idleAfter = 15 * time.Second
	for name, max := range map[string]int32{"auto": 2, "other": 1} {
		e.createReplicasWith(t, cluster, name, 0, func(s *sunkv1.NodeSetSpec) {
			s.Replicas = nil
			s.Autoscaling = &sunkv1.NodeSetAutoscaling{MaxReplicas: max, IdleAfter: &metav1.Duration{Duration: idleAfter}}
		})
	}
	parked := func(what string) time.Time {
		t.Helper()
		poll(t, 4*time.Minute, what, func() error {
			if err := e.allParked(t, login, "auto", "auto-0", "auto-1"); err != nil {
				return err
			}
			return e.allParked(t, login, "other", "other-0")
		})
		return time.Now()
	}
	parked("every node registered once, then parked")

	submitted := time.Now()
	job := e.sbatchHeld(t, login, "-N2 --constraint=auto -J grow")
	running := time.Since(submitted)
	if out := e.mustSh(t, login, "login", "squeue -h -j "+job+" -o %N"); out != "auto-[0-1]" {
		t.Fatalf("the 2-node job runs on %q, want auto-[0-1]", out)
	}
	if r := ptr.Deref(e.nodeSet(t, "auto").Spec.Replicas, -1); r != 2 {
		t.Fatalf("spec.replicas %d while the 2-node job runs, want 2", r)
	}
	poll(t, time.Minute, "sunk_nodeset_autoscaler_busy_nodes 2 while the job runs", func() error {
		if v := testenv.SumMetric(e.metrics, "sunk_nodeset_autoscaler_busy_nodes", "nodeset", "auto"); v != 2 {
			return fmt.Errorf("busy nodes %v", v)
		}
		return nil
	})
	e.hasEvent(t, "auto", sunkv1.ReasonScaledUp, "1 pending job(s) ask for 2 node(s)")
	// The other NodeSet is in the job's partition but lacks its feature: it was not asked.
	if o := e.nodeSet(t, "other"); ptr.Deref(o.Spec.Replicas, -1) != 0 || o.Status.PendingNodes != 0 {
		t.Errorf("NodeSet other: replicas %d, pendingNodes %d while a job it cannot run pends or runs; want 0 and 0", ptr.Deref(o.Spec.Replicas, -1), o.Status.PendingNodes)
	}
	e.hasNoEvent(t, "other", sunkv1.ReasonScaledUp, "1 pending job(s)")
	e.release(t, login, job)
	state, exit, end := e.jobEnd(t, login, job, 2*time.Minute)
	if state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("the job of the autoscaled nodes ended %s with exit %s", state, exit)
	}
	gone := parked("every node parked again after idleAfter").Sub(end)
	t.Logf("bench: name=autoscale-2node pending_to_running_s=%.1f idle_to_parked_s=%.1f idle_after_s=%.0f", running.Seconds(), gone.Seconds(), idleAfter.Seconds())
	e.hasEvent(t, "auto", sunkv1.ReasonScaledDown, "idle for")
	// Up: to register, and for the job; down: after each (a node whose idleAfter ended a
	// moment after the other's goes on its own). Parked: both, as the status says.
	up := testenv.SumMetric(e.metrics, "sunk_nodeset_autoscaler_decisions_total", "direction", "up")
	down := testenv.SumMetric(e.metrics, "sunk_nodeset_autoscaler_decisions_total", "direction", "down")
	parkedNodes := testenv.SumMetric(e.metrics, "sunk_nodeset_parked_nodes", "nodeset", "auto")
	if up < 2 || down < 2 || parkedNodes != 2 {
		t.Errorf("sunk_nodeset_autoscaler_decisions_total up %v down %v, sunk_nodeset_parked_nodes %v; want at least 2, at least 2, and 2", up, down, parkedNodes)
	}
}

// nodeSet reads a NodeSet of the test's namespace.
func (e *operatorEnv) nodeSet(t testing.TB, name string) *sunkv1.NodeSet {
	t.Helper()
	ns := &sunkv1.NodeSet{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// allParked says why an autoscaled NodeSet's members are not all parked; nil once its status
// counts them parked, none has a pod and Slurm lists each in state FUTURE.
func (e *operatorEnv) allParked(t testing.TB, login, nodeSet string, members ...string) error {
	t.Helper()
	ns := e.nodeSet(t, nodeSet)
	pods := e.memberPods(t, nodeSet)
	out, err := e.sh(t, login, "login", "scontrol -o show node -F "+strings.Join(members, ",")+" | grep -o 'State=[A-Z_+]*'")
	if ns.Status.Parked != int32(len(members)) || len(pods) != 0 || err != nil || strings.Count(out, "State=FUTURE") != len(members) {
		return fmt.Errorf("%s: replicas %d, %d pods, %d parked; Slurm: %v %q", nodeSet, ptr.Deref(ns.Spec.Replicas, -1), len(pods), ns.Status.Parked, err, out)
	}
	return nil
}

// hasEvent fails the test unless a NodeSet has an event of the reason whose note holds note.
func (e *operatorEnv) hasEvent(t *testing.T, nodeSet, reason, note string) {
	t.Helper()
	notes := e.nodeSetEvents(t, nodeSet, reason)
	for _, n := range notes {
		if strings.Contains(n, note) {
			return
		}
	}
	t.Fatalf("no %s event on NodeSet %s saying %q; seen: %q", reason, nodeSet, note, notes)
}

// hasNoEvent fails the test if a NodeSet has an event of the reason whose note holds note.
func (e *operatorEnv) hasNoEvent(t *testing.T, nodeSet, reason, note string) {
	t.Helper()
	for _, n := range e.nodeSetEvents(t, nodeSet, reason) {
		if strings.Contains(n, note) {
			t.Errorf("NodeSet %s has a %s event saying %q: %s", nodeSet, reason, note, n)
		}
	}
}

// nodeSetEvents are the notes of a NodeSet's events of the reason.
func (e *operatorEnv) nodeSetEvents(t *testing.T, nodeSet, reason string) []string {
	t.Helper()
	var events eventsv1.EventList
	if err := e.c.List(context.Background(), &events, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, ev := range events.Items {
		if ev.Regarding.Kind == "NodeSet" && ev.Regarding.Name == nodeSet && ev.Reason == reason {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}

// onePoolOfGPUs is the seeds' one pool on the machine of TestJobSeesOnlyItsGPUs, whose PerNode
// NodeSet "gpu" (member on the machine's one node) holds all of its GPUs with a PriorityClass
// above ordinary pods': a GPU pod of the default scheduler does not land while the compute pod
// holds the GPUs (no double booking); once the NodeSet autoscales (maxReplicas 1) and its node
// is idle, the member is parked, its pod leaves the node and the GPUs go to the pod (the
// machine handed back); a job that needs both GPUs then grows the NodeSet again, and the
// member's compute pod, pinned to the node, preempts the GPU pod (the machine taken back, by
// priority) and runs the job.
func (e *operatorEnv) onePoolOfGPUs(t *testing.T, login, member string) {
	t.Helper()
	ctx := context.Background()
	inference := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "inference"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{Name: "serve", Image: slurmImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "infinity"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					Limits:   corev1.ResourceList{wellknown.ResourceGPU: resource.MustParse("1")},
				}}},
		},
	}
	if err := e.c.Create(ctx, inference); err != nil {
		t.Fatal(err)
	}
	scheduled := func(want bool, why string) {
		t.Helper()
		poll(t, 3*time.Minute, "the GPU pod "+map[bool]string{true: "running", false: "unschedulable"}[want], func() error {
			p := &corev1.Pod{}
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(inference), p); err != nil {
				return err
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && !want && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, why) {
					return nil
				}
			}
			if want && p.Status.Phase == corev1.PodRunning {
				return nil
			}
			return fmt.Errorf("phase %s, conditions %+v", p.Status.Phase, p.Status.Conditions)
		})
	}
	scheduled(false, "nvidia.com/gpu")

	ns := &sunkv1.NodeSet{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "gpu"}, ns); err != nil {
		t.Fatal(err)
	}
	const idleAfter = 5 * time.Second
	e.update(t, ns, func() {
		ns.Spec.Autoscaling = &sunkv1.NodeSetAutoscaling{MaxReplicas: 1, IdleAfter: &metav1.Duration{Duration: idleAfter}}
	})
	asked := time.Now()
	scheduled(true, "")
	handedBack := time.Since(asked)
	if out := e.mustSh(t, login, "login", "scontrol -o show node -F "+member+" | grep -o 'State=[A-Z_+]*'"); out != "State=FUTURE+DYNAMIC_NORM" {
		t.Fatalf("%s after it went: %q, want parked", member, out)
	}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
		t.Fatal(err)
	} else if r := ns.Spec.Replicas; r == nil || *r != 0 {
		t.Fatalf("spec.replicas %v after the node went, want 0", r)
	}

	submitted := time.Now()
	job := e.sbatchHeld(t, login, "--gres=gpu:2 -J take-back")
	takenBack := time.Since(submitted)
	// The job runs (sbatchHeld waits for it), so the compute pod holds the GPUs; the preempted
	// pod's object goes once kubelet has reported its containers stopped: seconds on a quiet
	// machine, a minute or more on a loaded CI host.
	poll(t, 3*time.Minute, "the GPU pod preempted", func() error {
		p := &corev1.Pod{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(inference), p); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		return fmt.Errorf("the GPU pod is still there: %s", p.Status.Phase)
	})
	e.release(t, login, job)
	if state, exit, _ := e.jobEnd(t, login, job, 3*time.Minute); state != "COMPLETED" {
		t.Fatalf("the job that took the machine back: %s (exit %s)", state, exit)
	}
	e.hasEvent(t, "gpu", sunkv1.ReasonScaledDown, member+" idle for")
	e.hasEvent(t, "gpu", sunkv1.ReasonScaledUp, "ask for 1 node(s)")
	if p := e.podOf(t, "gpu", wellknown.ComponentCompute); p.Name != member || p.Spec.NodeName != e.NodeName {
		t.Errorf("compute pod %s on %q after the take-back, want %s on %s", p.Name, p.Spec.NodeName, member, e.NodeName)
	}
	t.Logf("bench: name=one-pool-gpus handed_back_s=%.1f taken_back_to_running_s=%.1f idle_after_s=%.0f",
		handedBack.Seconds(), takenBack.Seconds(), idleAfter.Seconds())
}
