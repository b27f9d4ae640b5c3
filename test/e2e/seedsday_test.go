//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
)

// seedsDayValues are the slurm chart's values the seeds' day adds to TestScheduler's cluster: an
// autoscaled NodeSet "train" (none of its nodes run until Slurm's queue asks), a partition
// "train" of its nodes whose preempted jobs go back to the queue (PreemptMode=REQUEUE over the
// cluster's CANCEL), and a partition "serve" of the same nodes at a higher tier, for pods.
const seedsDayValues = `  - name: train
    mode: Replicas
    autoscaling: {maxReplicas: 2, idleAfter: 15s}
`

const seedsDayPartitions = `  - {name: train, nodeSets: [train], priorityTier: 1, extraConf: "PreemptMode=REQUEUE"}
  - {name: serve, nodeSets: [train], priorityTier: 10}
`

// seedsDay is the day the seeds describe, on real Slurm, a real kubelet and sunk-scheduler: a
// training job asks for both nodes of an autoscaled NodeSet at zero, which grows for it; an
// inference Deployment (sunk-scheduler, partition serve, one gang of two pods: a model served
// across two nodes) scales from 0 to 2, and its gang's Slurm job preempts the training job,
// which Slurm requeues rather than kills; the Deployment scales back to 0, its job ends, and the
// training job runs again on the same machines, then completes; idle, the nodes are parked
// again. The bench line gives each hand-over.
//
// A requeued job may start again only once the old launch's credential has expired (Slurm's
// cred_expire, 120 s; docs/scheduler.md): the test moves its begin time to now with `scontrol
// update`, as an admin may, instead of waiting two minutes.
func (h *helmEnv) seedsDay(t *testing.T, login string) {
	t.Helper()
	ctx := context.Background()
	parked := func(what string) time.Time {
		t.Helper()
		poll(t, 4*time.Minute, what, func() error { return h.allParked(t, login, "train", "train-0", "train-1") })
		return time.Now()
	}
	parked("train's nodes registered once, then parked")

	// The training job: both nodes, at zero. It pends for nodes and the NodeSet grows for it.
	submitted := time.Now()
	training := h.sbatchHeld(t, login, "-p train -N2 --exclusive -J training")
	grown := time.Since(submitted)
	if r := ptr.Deref(h.nodeSet(t, "train").Spec.Replicas, -1); r != 2 {
		t.Fatalf("spec.replicas of train %d while the training job runs, want 2", r)
	}

	// The inference Deployment, at 0, then scaled to 2.
	dep := inferenceDeployment(h.ns)
	if err := h.c.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	scaled := time.Now()
	scale(t, h.c, dep, 2)
	var gangJob string
	poll(t, 3*time.Minute, "both inference pods bound and running", func() error {
		pods := h.inferencePods(t)
		if len(pods) != 2 {
			return fmt.Errorf("%d pods", len(pods))
		}
		for _, p := range pods {
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s: node %q, %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
			gangJob = p.Annotations[taintSlurmJob]
		}
		return nil
	})
	serving := time.Since(scaled)
	if out := h.mustSh(t, login, "squeue -h -j "+gangJob+" -o '%T %P %D'"); strings.TrimSpace(out) != "RUNNING serve 2" {
		t.Errorf("the inference gang's job %s: %q, want RUNNING serve 2", gangJob, out)
	}

	// The training job went back to the queue, not away: pending, restarted once.
	var requeued time.Duration
	poll(t, time.Minute, "training job requeued", func() error {
		state, restarts := h.jobStateRestarts(t, login, training)
		if state != "PENDING" || restarts != "1" {
			return fmt.Errorf("training job %s: %s, restarts %s; want PENDING, 1", training, state, restarts)
		}
		requeued = time.Since(scaled)
		return nil
	})
	h.mustSh(t, login, "scontrol update jobid="+training+" StartTime=now")

	// Scaled back to 0: the gang's job ends and the training job runs again on the same nodes.
	down := time.Now()
	scale(t, h.c, dep, 0)
	poll(t, 3*time.Minute, "training job running again", func() error {
		out, err := h.sh(t, login, "login", "squeue -h -j "+training+" -o '%T %N'")
		if err != nil || strings.TrimSpace(out) != "RUNNING train-[0-1]" {
			return fmt.Errorf("squeue: %v %q", err, out)
		}
		return nil
	})
	resumed := time.Since(down)
	if state, _, _ := h.jobEnd(t, login, gangJob, time.Minute); state != "CANCELLED" && state != "COMPLETED" {
		t.Errorf("the inference gang's job %s after the scale to 0: %s", gangJob, state)
	}
	h.release(t, login, training)
	state, exit, end := h.jobEnd(t, login, training, 2*time.Minute)
	if _, restarts := h.jobStateRestarts(t, login, training); state != "COMPLETED" || exit != "0:0" || restarts != "1" {
		t.Fatalf("training job %s ended %s, exit %s, restarts %s; want COMPLETED, 0:0, 1", training, state, exit, restarts)
	}
	gone := parked("train's nodes parked again once idle").Sub(end)
	h.operatorEnv.hasEvent(t, "train", sunkv1.ReasonScaledUp, "1 pending job(s) ask for 2 node(s)")
	h.operatorEnv.hasEvent(t, "train", sunkv1.ReasonScaledDown, "idle for")
	t.Logf("bench: name=seeds-day grow_to_running_s=%.1f scale_to_serving_s=%.1f scale_to_requeued_s=%.1f scale_down_to_resumed_s=%.1f idle_to_parked_s=%.1f",
		grown.Seconds(), serving.Seconds(), requeued.Seconds(), resumed.Seconds(), gone.Seconds())
}

// inferenceDeployment is a model served across two nodes: a Deployment at 0 replicas whose pods
// sunk-scheduler places as one gang of two in partition serve.
func inferenceDeployment(ns string) *appsv1.Deployment {
	labels := map[string]string{"app": "inference"}
	pod := busyboxPod("", "sleep 3600")
	pod.Spec.SchedulerName = "sunk-scheduler"
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "inference", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					annotationPartition: "serve", wellknown.AnnotationGang: "inference", wellknown.AnnotationGangSize: "2",
				}},
				Spec: pod.Spec,
			},
		},
	}
}

// scale sets a Deployment's replicas, as `kubectl scale` or a serverless layer would.
func scale(t *testing.T, c client.Client, dep *appsv1.Deployment, n int32) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)))
	if err := c.Patch(context.Background(), dep, patch); err != nil {
		t.Fatal(err)
	}
}

// inferencePods are the Deployment's pods that are not being deleted.
func (h *helmEnv) inferencePods(t *testing.T) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := h.c.List(context.Background(), &pods, client.InNamespace(h.ns), client.MatchingLabels{"app": "inference"}); err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// jobStateRestarts reads a job's state and restart count from slurmctld.
func (h *helmEnv) jobStateRestarts(t *testing.T, login, id string) (state, restarts string) {
	t.Helper()
	out := h.mustSh(t, login, "scontrol -o show job "+id)
	field := func(k string) string {
		if m := regexp.MustCompile(`\b` + k + `=(\S+)`).FindStringSubmatch(out); m != nil {
			return m[1]
		}
		return ""
	}
	return field("JobState"), field("Restarts")
}
