// Gangs from workloads: the gang of a pod made by a LeaderWorkerSet or a JobSet, read from
// the labels and annotations their controllers put on every pod (keys in pkg/wellknown).

package plugin

import (
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"sunk.dev/sunk/pkg/wellknown"
)

// maxGangSize is the largest gang the scheduler takes, from any source.
const maxGangSize = 10000

// workloadError says why a pod of a recognised workload cannot be scheduled as its gang.
// Waiting: the pod's Job is not in the cache yet (or not the pod's Job any more); the pod is
// asked again when it is (activateJobPods).
type workloadError struct {
	From    gangSource
	Why     string
	Waiting bool
}

func (e *workloadError) Error() string { return fmt.Sprintf("%s gang: %s", e.From, e.Why) }

// lwsGang: a LeaderWorkerSet group (the leader and its workers) is one gang of the group's size,
// named leaderworkerset/<set>/<group index>. A group of one is a plain pod.
func lwsGang(pod *v1.Pod, set string) (gang, gangSource, error) {
	idx, ok := pod.Labels[wellknown.LWSLabelGroupIndex]
	g := gang{Name: "leaderworkerset/" + set + "/" + idx}
	if _, err := strconv.ParseUint(idx, 10, 32); !ok || err != nil {
		return gang{}, "", &workloadError{From: gangFromLeaderWorkerSet, Why: fmt.Sprintf("label %s=%q: want the group's index", wellknown.LWSLabelGroupIndex, idx)}
	}
	v := pod.Annotations[wellknown.LWSAnnotationSize]
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxGangSize {
		return g, gangFromLeaderWorkerSet, &workloadError{From: gangFromLeaderWorkerSet, Why: fmt.Sprintf("annotation %s=%q: want an integer from 1 to %d", wellknown.LWSAnnotationSize, v, maxGangSize)}
	}
	if n == 1 {
		return gang{}, "", nil
	}
	g.Size = n
	return g, gangFromLeaderWorkerSet, nil
}

// jobSetGang: the pods of one replicated job of a JobSet, all its Jobs, are one gang, named
// jobset/<set>/<replicated job> (with /restart-<n> after the JobSet's n-th restart, so that a
// restarted JobSet's pods are never one gang with the old ones), of the replicated job's
// replicas times its Jobs' parallelism (at most their completions). A replicated job, not the
// whole JobSet: JobSet starts replicated jobs one after another when told to (startupPolicy
// InOrder, dependsOn; Kubeflow Trainer's nodes wait for its initializers), so a gang of the
// whole set could wait for pods never made. The pods carry the replicas but not the
// parallelism, which is read from the pod's controlling Job in the scheduler's Job cache (the
// Jobs of a replicated job share one template). A gang of one is a plain pod.
func jobSetGang(pod *v1.Pod, set string, jobs batchlisters.JobLister) (gang, gangSource, error) {
	rjob, idx := pod.Labels[wellknown.JobSetLabelReplicatedJob], pod.Labels[wellknown.JobSetLabelJobIndex]
	if _, err := strconv.ParseUint(idx, 10, 32); rjob == "" || err != nil {
		return gang{}, "", &workloadError{From: gangFromJobSet, Why: fmt.Sprintf("labels %s=%q, %s=%q: want the replicated job and the job's index",
			wellknown.JobSetLabelReplicatedJob, rjob, wellknown.JobSetLabelJobIndex, idx)}
	}
	g := gang{Name: "jobset/" + set + "/" + rjob}
	if a := pod.Labels[wellknown.JobSetLabelRestartAttempt]; a != "" && a != "0" {
		if _, err := strconv.ParseUint(a, 10, 32); err != nil {
			return gang{}, "", &workloadError{From: gangFromJobSet, Why: fmt.Sprintf("label %s=%q: want the restart attempt", wellknown.JobSetLabelRestartAttempt, a)}
		}
		g.Name += "/restart-" + a
	}
	v := pod.Labels[wellknown.JobSetLabelReplicatedJobReplicas]
	replicas, err := strconv.Atoi(v)
	if err != nil || replicas < 1 || replicas > maxGangSize {
		return g, gangFromJobSet, &workloadError{From: gangFromJobSet, Why: fmt.Sprintf("label %s=%q: want an integer from 1 to %d", wellknown.JobSetLabelReplicatedJobReplicas, v, maxGangSize)}
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "Job" || owner.APIVersion != batchv1.SchemeGroupVersion.String() {
		return g, gangFromJobSet, &workloadError{From: gangFromJobSet, Why: "the pod has no controlling batch/v1 Job to read the gang's size from"}
	}
	if jobs == nil {
		return g, gangFromJobSet, &workloadError{From: gangFromJobSet, Why: "no Job cache to read the gang's size from", Waiting: true}
	}
	job, err := jobs.Jobs(pod.Namespace).Get(owner.Name)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && job.UID != owner.UID):
		return g, gangFromJobSet, &workloadError{From: gangFromJobSet, Why: fmt.Sprintf("waiting for Job %s/%s", pod.Namespace, owner.Name), Waiting: true}
	case err != nil:
		return g, gangFromJobSet, &workloadError{From: gangFromJobSet, Why: err.Error(), Waiting: true}
	}
	n := replicas * jobPods(job)
	if n > maxGangSize {
		return g, gangFromJobSet, &workloadError{From: gangFromJobSet, Why: fmt.Sprintf("replicated job %s: %d Jobs of %d pods at once, more than %d", rjob, replicas, jobPods(job), maxGangSize)}
	}
	if n <= 1 {
		return gang{}, "", nil
	}
	g.Size = n
	return g, gangFromJobSet, nil
}

// jobPods is how many pods a Job runs at once: its parallelism (1 when unset), at most its
// completions.
func jobPods(job *batchv1.Job) int {
	n := 1
	if job.Spec.Parallelism != nil {
		n = int(*job.Spec.Parallelism)
	}
	if job.Spec.Completions != nil {
		n = min(n, int(*job.Spec.Completions))
	}
	return n
}

// waitingHere says a pod is this scheduler's, not bound and not ended: one a workload's
// arrival may let back into the queue.
func (p *Plugin) waitingHere(pod *v1.Pod) bool {
	return pod.Spec.SchedulerName == p.scheduler && pod.Spec.NodeName == "" && alive(pod)
}

// activateJobPods lets a JobSet's Job's pending pods back into the queue when the Job reaches
// the cache: pods seen before their Job wait for it (workloadError.Waiting).
func (p *Plugin) activateJobPods(logger klog.Logger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		job, ok := obj.(*batchv1.Job)
		if !ok || job.Labels[wellknown.JobSetLabelName] == "" {
			return
		}
		all, _ := p.pods.Pods(job.Namespace).List(labels.Everything())
		var waiting []*v1.Pod
		for _, pod := range all {
			if owner := metav1.GetControllerOf(pod); owner != nil && owner.UID == job.UID &&
				p.waitingHere(pod) {
				waiting = append(waiting, pod)
			}
		}
		p.activate(logger, waiting)
	}}
}
