package slurmcluster

// The deadline of an auth key rotation (wellknown.AnnotationAuthKeyDeadline): what ends the wait
// for jobs that started under the previous ring, so that a rotation after a key leaked cannot be
// stalled for ever by one long job.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// authDeadline reads AnnotationAuthKeyDeadline: "" is no deadline (0); anything else must be a
// positive Go duration.
func authDeadline(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a positive duration such as 24h or 90m", v)
	}
	return d, nil
}

// requeueOldJobs ends the wait for the jobs that started under the previous ring once the
// admin's deadline has passed: each is requeued with `scontrol requeue` in slurmctld's pod
// (slurmrestd has no requeue) and starts again, under the new ring, when Slurm schedules it; a
// job Slurm refuses to requeue (--no-requeue, a batch job's step) is cancelled over REST. The
// event names every job and what was done to it. A job already ending (COMPLETING, as a requeued
// one does) is waited for: its slurmstepd signs its last messages with the previous ring.
func (r *Reconciler) requeueOldJobs(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, jwtKeys slurmconn.Keys, old []slurm.Job, st *status) (ctrl.Result, error) {
	var ids []uint32
	for _, j := range old {
		if !j.HasState("COMPLETING") {
			ids = append(ids, j.ID)
		}
	}
	if len(ids) == 0 {
		st.set(sunkv1.ConditionAuthKeyRotated, false, sunkv1.ReasonAuthWaitingForJobs,
			fmt.Sprintf("%s passed; waiting for %d job(s) that started before to finish ending", wellknown.AnnotationAuthKeyDeadline, len(old)))
		return ctrl.Result{RequeueAfter: authPoll}, nil
	}
	pod := &corev1.Pod{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: n.ControllerPod(0)}, pod); err != nil {
		return ctrl.Result{}, err
	}
	if !kube.PodReady(pod) {
		st.set(sunkv1.ConditionAuthKeyRotated, false, sunkv1.ReasonAuthWaitingForJobs, "the deadline passed; waiting for slurmctld to be ready to requeue the jobs that started before")
		return ctrl.Result{RequeueAfter: authPoll}, nil
	}
	sl, err := r.slurmFor(ctx, sc, n, jwtKeys)
	if err != nil {
		return ctrl.Result{}, err
	}
	var requeued, cancelled, failed []string
	for _, id := range ids {
		job := strconv.FormatUint(uint64(id), 10)
		out, err := r.Exec.Exec(ctx, n.Namespace, pod.Name, render.ControllerContainer, "scontrol", "requeue", job)
		if err == nil {
			requeued = append(requeued, job)
			continue
		}
		if cerr := sl.CancelJob(ctx, id); cerr != nil {
			failed = append(failed, fmt.Sprintf("%s (requeue: %v %s; cancel: %v)", job, err, strings.TrimSpace(out), cerr))
			continue
		}
		cancelled = append(cancelled, job)
	}
	msg := fmt.Sprintf("%s passed: jobs that started under the previous key ring requeued: [%s], cancelled (Slurm would not requeue them): [%s]",
		wellknown.AnnotationAuthKeyDeadline, strings.Join(requeued, " "), strings.Join(cancelled, " "))
	r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonAuthOldJobsRequeued, msg)
	st.set(sunkv1.ConditionAuthKeyRotated, false, sunkv1.ReasonAuthOldJobsRequeued, msg)
	if len(failed) > 0 {
		return ctrl.Result{}, fmt.Errorf("ending jobs past %s: %s", wellknown.AnnotationAuthKeyDeadline, strings.Join(failed, "; "))
	}
	return ctrl.Result{RequeueAfter: authPoll}, nil
}
