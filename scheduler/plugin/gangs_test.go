package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
)

// parsePod is specOf for a pod alone (no plugin, so no workload caches): the tests' way to read
// a pod's spec.
func parsePod(pod *v1.Pod) (*podSpec, error) {
	g, from, err := readGang(pod, nil, nil)
	return specFor(pod, g, from, err)
}

// lwsPod is pod i of group group of LeaderWorkerSet set of the given size, labelled and
// annotated as LWS v0.7.0 does: the leader (worker index 0) by the leader StatefulSet's template
// (name, worker-index, revision) and the pod webhook (group-index, group-key); a worker by its
// group's StatefulSet template (name, group-index, group-key, revision; annotation leader-name)
// and the webhook (worker-index).
func lwsPod(set string, group, i, size int) *v1.Pod {
	leader := fmt.Sprintf("%s-%d", set, group)
	name := leader
	ann := map[string]string{wellknown.LWSAnnotationSize: fmt.Sprint(size)}
	if i > 0 {
		name = fmt.Sprintf("%s-%d", leader, i)
		ann["leaderworkerset.sigs.k8s.io/leader-name"] = leader
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Annotations: ann,
		Labels: map[string]string{
			wellknown.LWSLabelName:                               set,
			wellknown.LWSLabelGroupIndex:                         fmt.Sprint(group),
			wellknown.LWSLabelWorkerIndex:                        fmt.Sprint(i),
			"leaderworkerset.sigs.k8s.io/group-key":              "5e7a2c1f0b3d9e8a7c6b5a4f3e2d1c0b9a8f7e6d",
			"leaderworkerset.sigs.k8s.io/template-revision-hash": "7d9f8c6b5",
		}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
}

// jobSetJob is Job index idx of replicated job rjob (of one Job: replicas sets more) of JobSet
// set, running n pods at once.
func jobSetJob(set, rjob string, idx int, parallelism, completions *int32) *batchv1.Job {
	name := fmt.Sprintf("%s-%s-%d", set, rjob, idx)
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("job-" + name),
		Labels: map[string]string{wellknown.JobSetLabelName: set, wellknown.JobSetLabelReplicatedJob: rjob, wellknown.JobSetLabelJobIndex: fmt.Sprint(idx),
			wellknown.JobSetLabelReplicatedJobReplicas: "1"}},
		Spec: batchv1.JobSpec{Parallelism: parallelism, Completions: completions}}
}

// replicas makes the Job's replicated job one of n Jobs.
func replicas(job *batchv1.Job, n int) *batchv1.Job {
	job.Labels[wellknown.JobSetLabelReplicatedJobReplicas] = fmt.Sprint(n)
	return job
}

// jobSetPod is pod i of the Job, labelled as JobSet v0.10.1's labelAndAnnotateObject labels the
// pod template (the same keys as annotations too) and as the Job controller labels its pods.
func jobSetPod(job *batchv1.Job, i int) *v1.Pod {
	set, rjob, idx := job.Labels[wellknown.JobSetLabelName], job.Labels[wellknown.JobSetLabelReplicatedJob], job.Labels[wellknown.JobSetLabelJobIndex]
	meta := map[string]string{
		wellknown.JobSetLabelName:                  set,
		"jobset.sigs.k8s.io/jobset-uid":            "3f1c2a9e-0000-4000-8000-000000000001",
		wellknown.JobSetLabelReplicatedJob:         rjob,
		wellknown.JobSetLabelRestartAttempt:        "0",
		wellknown.JobSetLabelReplicatedJobReplicas: job.Labels[wellknown.JobSetLabelReplicatedJobReplicas],
		"jobset.sigs.k8s.io/global-replicas":       "2",
		wellknown.JobSetLabelJobIndex:              idx,
		"jobset.sigs.k8s.io/job-key":               "0a4c1e5b7d9f2a6c8e0b3d5f7a9c1e3b5d7f9a2c",
		"jobset.sigs.k8s.io/job-global-index":      idx,
		"jobset.sigs.k8s.io/group-name":            "default",
		"jobset.sigs.k8s.io/group-replicas":        "2",
		"jobset.sigs.k8s.io/job-group-index":       idx,
	}
	labels := map[string]string{"batch.kubernetes.io/job-name": job.Name, "batch.kubernetes.io/controller-uid": string(job.UID),
		"batch.kubernetes.io/job-completion-index": fmt.Sprint(i)}
	ann := map[string]string{"batch.kubernetes.io/job-completion-index": fmt.Sprint(i)}
	for k, v := range meta {
		labels[k], ann[k] = v, v
	}
	name := fmt.Sprintf("%s-%d-x%d", job.Name, i, i)
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: labels, Annotations: ann,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
}

func with(pod *v1.Pod, kv ...string) *v1.Pod {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "-" {
			delete(pod.Labels, kv[i])
			delete(pod.Annotations, kv[i])
			continue
		}
		pod.Annotations[kv[i]] = kv[i+1]
	}
	return pod
}

// relabelled sets the label k to v, as a controller writes it.
func relabelled(pod *v1.Pod, k, v string) *v1.Pod {
	pod.Labels[k] = v
	return pod
}

// TestReadGang: the gang of a pod from sunk's annotations, a LeaderWorkerSet group or a
// JobSet's replicated job, with the labels their controllers write; sunk's annotations win.
func TestReadGang(t *testing.T) {
	jobs := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Batch().V1().Jobs()
	four := replicas(jobSetJob("train", "workers", 1, ptr.To[int32](4), ptr.To[int32](4)), 2)
	pairOfOnes := replicas(jobSetJob("train", "ps", 0, ptr.To[int32](1), ptr.To[int32](1)), 2)
	one := jobSetJob("train", "driver", 0, ptr.To[int32](1), ptr.To[int32](1))
	capped := jobSetJob("train", "eval", 0, ptr.To[int32](4), ptr.To[int32](2))
	defaulted := jobSetJob("train", "queue", 0, nil, nil)
	for _, j := range []*batchv1.Job{four, pairOfOnes, one, capped, defaulted} {
		if err := jobs.Informer().GetIndexer().Add(j); err != nil {
			t.Fatal(err)
		}
	}
	missing := jobSetJob("train", "late", 0, ptr.To[int32](2), nil)
	recreated := jobSetPod(four, 0)
	recreated.OwnerReferences[0].UID = "an-older-job"
	orphan := jobSetPod(four, 0)
	orphan.OwnerReferences = nil

	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		want    gang
		from    gangSource
		err     string // in the error; "" none
		waiting bool
	}{
		{"plain pod", pod(nil, nil), gang{}, "", "", false},
		{"annotated", pod(map[string]string{wellknown.AnnotationGang: "g", wellknown.AnnotationGangSize: "3"}, nil), gang{"g", 3}, gangFromAnnotation, "", false},
		{"annotated, size missing", pod(map[string]string{wellknown.AnnotationGang: "g"}, nil), gang{Name: "g"}, gangFromAnnotation, "required with sunk.dev/gang", false},

		{"LWS leader", lwsPod("web", 1, 0, 4), gang{"leaderworkerset/web/1", 4}, gangFromLeaderWorkerSet, "", false},
		{"LWS worker", lwsPod("web", 1, 3, 4), gang{"leaderworkerset/web/1", 4}, gangFromLeaderWorkerSet, "", false},
		{"LWS other group", lwsPod("web", 0, 2, 4), gang{"leaderworkerset/web/0", 4}, gangFromLeaderWorkerSet, "", false},
		{"LWS of size 1: a plain pod", lwsPod("web", 1, 0, 1), gang{}, "", "", false},
		{"LWS, sunk's annotations win", with(lwsPod("web", 1, 2, 4), wellknown.AnnotationGang, "mine", wellknown.AnnotationGangSize, "2"),
			gang{"mine", 2}, gangFromAnnotation, "", false},
		{"LWS, a sunk annotation alone is an error", with(lwsPod("web", 1, 2, 4), wellknown.AnnotationGangSize, "2"), gang{}, "", "sunk.dev/gang", false},
		{"LWS without a group index", with(lwsPod("web", 1, 0, 4), wellknown.LWSLabelGroupIndex, "-"), gang{}, "", "group-index", false},
		{"LWS without a size", with(lwsPod("web", 1, 0, 4), wellknown.LWSAnnotationSize, "-"), gang{Name: "leaderworkerset/web/1"}, gangFromLeaderWorkerSet, "leaderworkerset.sigs.k8s.io/size", false},

		{"JobSet replicated job of 2 Jobs of 4", jobSetPod(four, 2), gang{"jobset/train/workers", 8}, gangFromJobSet, "", false},
		{"JobSet replicated job of 2 Jobs of 1", jobSetPod(pairOfOnes, 0), gang{"jobset/train/ps", 2}, gangFromJobSet, "", false},
		{"JobSet replicated job of 1 Job of 1: a plain pod", jobSetPod(one, 0), gang{}, "", "", false},
		{"JobSet Job of parallelism 4, completions 2", jobSetPod(capped, 0), gang{"jobset/train/eval", 2}, gangFromJobSet, "", false},
		{"JobSet Job without parallelism: one pod", jobSetPod(defaulted, 0), gang{}, "", "", false},
		{"JobSet restarted twice: a gang of its own", relabelled(jobSetPod(four, 0), wellknown.JobSetLabelRestartAttempt, "2"), gang{"jobset/train/workers/restart-2", 8}, gangFromJobSet, "", false},
		{"JobSet, sunk's annotations win", with(jobSetPod(four, 0), wellknown.AnnotationGang, "mine", wellknown.AnnotationGangSize, "4"),
			gang{"mine", 4}, gangFromAnnotation, "", false},
		{"JobSet Job not cached yet", jobSetPod(missing, 0), gang{Name: "jobset/train/late"}, gangFromJobSet, "waiting for Job ns/train-late-0", true},
		{"JobSet pod of an older Job", recreated, gang{Name: "jobset/train/workers"}, gangFromJobSet, "waiting for Job", true},
		{"JobSet pod without a Job", orphan, gang{Name: "jobset/train/workers"}, gangFromJobSet, "no controlling batch/v1 Job", false},
		{"JobSet pod without a job index", with(jobSetPod(four, 0), wellknown.JobSetLabelJobIndex, "-"), gang{}, "", "job-index", false},
		{"JobSet pod without its replicated job's replicas", with(jobSetPod(four, 0), wellknown.JobSetLabelReplicatedJobReplicas, "-"), gang{Name: "jobset/train/workers"}, gangFromJobSet, "replicatedjob-replicas", false},
		{"JobSet pod of a bad restart attempt", relabelled(jobSetPod(four, 0), wellknown.JobSetLabelRestartAttempt, "x"), gang{}, "", "restart-attempt", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, from, err := readGang(tc.pod, jobs.Lister(), nil)
			if g != tc.want || from != tc.from {
				t.Errorf("gang %+v from %q, want %+v from %q", g, from, tc.want, tc.from)
			}
			if (err != nil) != (tc.err != "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error %v, want one with %q", err, tc.err)
			}
			var we *workloadError
			if waiting := errors.As(err, &we) && we.Waiting; waiting != tc.waiting {
				t.Errorf("waiting %v, want %v (%v)", waiting, tc.waiting, err)
			}
		})
	}
}

// reserveGang runs a cycle for pod and its Reserve: the status says whether it submitted.
func reserveGang(t *testing.T, b *testBed, pod *v1.Pod) *framework.Status {
	t.Helper()
	state, st, passed := b.cycle(b.p, pod)
	if !st.IsSuccess() || len(passed) == 0 {
		t.Fatalf("PreFilter of %s: %v, nodes %v", pod.Name, st, passed)
	}
	return b.p.Reserve(context.Background(), state, pod, passed[0])
}

// TestWorkloadGangIsOneJob: the pods of a LeaderWorkerSet group, and of a JobSet's replicated job, become
// one Slurm job once all are there, sized from the workload, as an annotated gang does.
func TestWorkloadGangIsOneJob(t *testing.T) {
	job := jobSetJob("train", "workers", 0, ptr.To[int32](3), ptr.To[int32](3))
	for _, tc := range []struct {
		name    string
		members []*v1.Pod
		gang    string
	}{
		{"LeaderWorkerSet", []*v1.Pod{lwsPod("web", 0, 0, 3), lwsPod("web", 0, 1, 3), lwsPod("web", 0, 2, 3)}, "leaderworkerset/web/0"},
		{"JobSet", []*v1.Pod{jobSetPod(job, 0), jobSetPod(job, 1), jobSetPod(job, 2)}, "jobset/train/workers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := slurmfake.New()
			w := newHookClient(t, fk, false)
			b := newTestBed(t, 3, w, fk)
			if err := b.h.inf.Batch().V1().Jobs().Informer().GetIndexer().Add(job); err != nil {
				t.Fatal(err)
			}
			// Another group of the same set, and a plain pod, are not members.
			b.addPod(lwsPod("web", 1, 0, 3))
			b.addPod(pod(nil, nil))
			b.addPod(tc.members[0])
			b.addPod(tc.members[1])
			want := fmt.Sprintf("gang %s has 2 of 3 pods", tc.gang)
			if st := reserveGang(t, b, tc.members[0]); st.Code() != framework.Unschedulable || st.Message() != want {
				t.Fatalf("Reserve with 2 of 3: %v, want %q", st, want)
			}
			b.addPod(tc.members[2])
			if st := reserveGang(t, b, tc.members[1]); st.Code() != framework.Unschedulable || st.Message() != "submitting the Slurm job" {
				t.Fatalf("Reserve with 3 of 3: %v, want a submission", st)
			}
			id := receive(t, w.submitted, "the gang's submission")
			j, err := fk.GetJob(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if j.Name != "sunk-gang-ns-"+tc.gang || !strings.HasPrefix(j.Comment, gangPrefix) {
				t.Errorf("job %q, comment %q", j.Name, j.Comment)
			}
			b.poll(b.p)
			for _, m := range tc.members {
				if got, ok := b.p.jobOf(m); !ok || got.ID != id {
					t.Errorf("%s: job %v, want %d", m.Name, got, id)
				}
			}
		})
	}
}

// TestJobSetPodBeforeItsJob: a JobSet pod the scheduler sees before its Job waits without an
// error event, and is let in again when the Job is cached.
func TestJobSetPodBeforeItsJob(t *testing.T) {
	b := newTestBed(t, 3, nil, nil)
	job := jobSetJob("train", "workers", 0, ptr.To[int32](2), nil)
	member := b.addPod(jobSetPod(job, 0))
	_, st, _ := b.cycle(b.p, member)
	if st.Code() != framework.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "waiting for Job ns/train-workers-0") {
		t.Fatalf("PreFilter: %v, want unresolvable, waiting for the Job", st)
	}
	select {
	case e := <-b.h.rec.Events:
		t.Errorf("event %q for a pod waiting for its Job", e)
	default:
	}
	b.h.activated = nil
	b.p.activateJobPods(klog.Background()).OnAdd(job, false)
	if want := []string{"ns/" + member.Name}; !slices.Equal(b.h.activated, want) {
		t.Errorf("activated %v, want %v", b.h.activated, want)
	}
}
