package plugin

import (
	"context"
	"testing"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"sunk.dev/sunk/pkg/slurm"
)

// A job's resources are free for another job when it has ended and no longer completes:
// slurmctld places nothing on a node while a job there completes.
func TestFreedResources(t *testing.T) {
	job := func(nodes string, state ...string) *slurm.Job { return &slurm.Job{ID: 1, Nodes: nodes, State: state} }
	for _, tc := range []struct {
		name     string
		old, cur *slurm.Job
		want     bool
	}{
		{"running, then cancelled and completing", job("n1", "RUNNING"), job("n1", "CANCELLED", "COMPLETING"), false},
		{"completing, then done", job("n1", "CANCELLED", "COMPLETING"), job("n1", "CANCELLED"), true},
		{"running, then done between two lists", job("n1", "RUNNING"), job("n1", "COMPLETED"), true},
		{"running and completing (a step ends), then running", job("n1", "RUNNING", "COMPLETING"), job("n1", "RUNNING"), false},
		{"done, seen again", job("n1", "CANCELLED"), job("n1", "CANCELLED"), false},
		{"pending, then cancelled: it had no nodes", job("", "PENDING"), job("", "CANCELLED"), false},
		{"an allocation refused", job("", "PENDING"), job("", "FAILED"), false},
		{"first seen ended: it lived less than a poll", nil, job("n1", "CANCELLED"), true},
		{"first seen completing", nil, job("n1", "CANCELLED", "COMPLETING"), false},
		{"first seen refused", nil, job("", "FAILED"), false},
	} {
		if got := freedResources(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: freedResources = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A deleted pod with a live job wakes the lifecycle loop at once, and its job's release is
// timed from then: notice and cancel when the cancellation is answered, complete when the job
// is done completing. Another scheduler's pod, or one without a job, wakes nothing.
func TestPodGoneWakesLifecycleAndTimesRelease(t *testing.T) {
	b := newTestBed(t, 1, nil, nil)
	p := b.p
	handler := p.podGoneHandler()
	wakes := func() int {
		select {
		case <-p.jobsChanged:
			return 1
		default:
			return 0
		}
	}

	other := b.addPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "o", Namespace: "ns", UID: "u-other"}, Spec: v1.PodSpec{SchedulerName: "default-scheduler"}})
	handler.OnDelete(other)
	lone := b.addPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns", UID: "u-lone"}})
	handler.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/l", Obj: lone})
	if n := wakes(); n != 0 {
		t.Fatalf("a pod of another scheduler and one without a job woke the loop")
	}

	pd := b.addPod(pod(nil, nil))
	if st := p.PreEnqueue(context.Background(), pd); st.IsSuccess() {
		t.Fatalf("a new pod: %v, want held while its job is asked for", st)
	}
	job := waitForJob(t, b, b.slurm, pd)
	b.poll(p)
	wakes() // the submission's own

	finished := pd.DeepCopy()
	finished.Status.Phase = v1.PodSucceeded
	handler.OnUpdate(pd, finished)
	if wakes() != 1 {
		t.Fatal("a finished pod with a live job did not wake the lifecycle loop")
	}
	handler.OnDelete(finished) // seen gone once: the first time counts

	before := map[string]uint64{}
	for _, phase := range []string{"notice", "cancel", "complete"} {
		before[phase] = releaseCount(t, phase)
	}
	p.lc.mu.Lock()
	p.lc.markCancelling(job.ID)
	p.lc.mu.Unlock()
	p.cancel(klog.Background(), job.ID, "pod-finished", nil)
	running := *job // slurmfake queued it; as if it had started
	running.State, running.Nodes = []string{"RUNNING"}, "n1"
	done := running
	done.State = []string{"CANCELLED"}
	p.sawFreed(&running, &done)
	for _, phase := range []string{"notice", "cancel", "complete"} {
		if got := releaseCount(t, phase) - before[phase]; got != 1 {
			t.Errorf("phase %s observed %d times, want once", phase, got)
		}
	}
	p.releases.mu.Lock()
	defer p.releases.mu.Unlock()
	if len(p.releases.gone)+len(p.releases.answered) != 0 {
		t.Errorf("the release clock keeps %v %v after the job completed", p.releases.gone, p.releases.answered)
	}
}

func releaseCount(t *testing.T, phase string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := releaseSeconds.WithLabelValues(phase).(interface{ Write(*dto.Metric) error }).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
