//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sunk.dev/sunk/pkg/wellknown"
)

// jobSetPreempted (issue 43): a JobSet whose gang a higher tier preempts comes back as one
// gang. JobSet retrain (one Job of two pods in partition widebatch, tier 1 on NodeSet wide;
// failurePolicy maxRestarts 3) runs as one Slurm job. An exclusive gang of three pods in
// partition wide (tier 10), one per machine, preempts it: Slurm ends the job (PreemptMode
// CANCEL), sunk-scheduler evicts its pods (SlurmPreempted), their Job fails and the JobSet
// controller restarts the JobSet. Its new pods wait while the preemptor holds the machines;
// when the preemptor goes they are bound together, in one new Slurm job. (A restarted pod may
// be given a machine in the moment between the old job's end and the preemptor's start, and be
// preempted again: hence restarts to spare, and "at least one restart".)
func (h *helmEnv) jobSetPreempted(t *testing.T, login string) {
	t.Helper()
	ctx := context.Background()
	created := time.Now()
	js := h.createYAML(t, `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: retrain}
spec:
  failurePolicy: {maxRestarts: 3}
  replicatedJobs:
`+replicatedJobYAML("workers", 1, "widebatch"))
	sel := client.MatchingLabels{wellknown.JobSetLabelName: "retrain"}
	const gang = "jobset/retrain/workers"
	first := h.waitGangs(t, sel, 2, 1, jobSetGangName, nil)
	h.gangJobsInSlurm(t, login, "jobset/retrain/", "widebatch", first)
	firstBound := time.Since(created)
	oldUIDs := h.podUIDs(t, sel)

	// The preemptor: an exclusive gang of three in partition wide.
	machines := h.nodesOnLeaves(t, wideLeaves)
	urgent := client.MatchingLabels{"app": "urgent-wide"}
	t.Cleanup(func() {
		_ = h.c.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(h.ns), urgent)
		for _, m := range machines {
			untaint(t, h, m)
		}
	})
	preempting := time.Now()
	for i := range machines {
		h.createSmallPod(t, fmt.Sprintf("urgent-wide-%d", i), map[string]string{"app": "urgent-wide"}, map[string]string{annotationPartition: "wide",
			wellknown.AnnotationGang: "urgent-wide", wellknown.AnnotationGangSize: fmt.Sprint(len(machines))})
	}
	if state, _, _ := h.jobEnd(t, login, first[gang], 2*time.Minute); state != "PREEMPTED" && state != "CANCELLED" {
		t.Errorf("JobSet retrain's job %s after the preemptor came: %s, want PREEMPTED", first[gang], state)
	}
	preempted := time.Since(preempting)
	urgentJob := h.waitGangs(t, urgent, len(machines), 1, func(*corev1.Pod) string { return "urgent-wide" }, nil)["urgent-wide"]
	t.Logf("the preemptor's gang runs in job %s; JobSet retrain's job %s ended %s after the preemptor came",
		urgentJob, first[gang], preempted.Round(100*time.Millisecond))

	// The JobSet restarted: its live pods carry a restart attempt and wait for the machines.
	attempt := ""
	poll(t, 2*time.Minute, "JobSet retrain's pods restarted", func() error {
		var pods corev1.PodList
		if err := h.c.List(ctx, &pods, client.InNamespace(h.ns), sel); err != nil {
			return err
		}
		var fresh []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || slices.Contains(oldUIDs, p.UID) || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				continue
			}
			if attempt = p.Labels[wellknown.JobSetLabelRestartAttempt]; attempt == "" || attempt == "0" {
				return fmt.Errorf("pod %s of restart attempt %q", p.Name, attempt)
			}
			if p.Spec.NodeName != "" {
				t.Errorf("pod %s of the restarted JobSet bound to %s while the preemptor holds every machine", p.Name, p.Spec.NodeName)
			}
			fresh = append(fresh, p.Name)
		}
		if len(fresh) != 2 {
			return fmt.Errorf("new pods %v, want 2", fresh)
		}
		return nil
	})
	restarted := time.Since(preempting)

	// The preemptor goes: the restarted JobSet's gang is bound again, in one new job.
	gone := time.Now()
	if err := h.c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(h.ns), urgent); err != nil {
		t.Fatal(err)
	}
	again := h.waitGangs(t, sel, 2, 1, jobSetGangName, oldUIDs)
	restartedGang := gang + "/restart-" + attempt
	if again[restartedGang] == "" || again[restartedGang] == first[gang] {
		t.Errorf("the restarted JobSet's gangs %v: want %s in a job other than the old %s", again, restartedGang, first[gang])
	}
	h.gangJobsInSlurm(t, login, "jobset/retrain/", "widebatch", again)
	rebound := time.Since(gone)
	t.Logf("the preemptor went: JobSet retrain's restarted gang %s bound and running in job %s %s later",
		restartedGang, again[restartedGang], rebound.Round(100*time.Millisecond))

	if err := h.c.Delete(ctx, js, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	if state, _, _ := h.jobEnd(t, login, again[restartedGang], time.Minute); state != "CANCELLED" && state != "COMPLETED" {
		t.Errorf("JobSet retrain's job %s after the JobSet went: %s", again[restartedGang], state)
	}
	for _, m := range machines {
		h.waitUnlocked(t, m)
	}
	t.Logf("bench: name=jobset-preempted bound_s=%.1f preempted_s=%.1f restarted_s=%.1f restart_attempt=%s rebound_s=%.1f step_s=%.1f",
		firstBound.Seconds(), preempted.Seconds(), restarted.Seconds(), attempt, rebound.Seconds(), time.Since(created).Seconds())
}
