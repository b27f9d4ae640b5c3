//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sunk.dev/sunk/pkg/wellknown"
)

// The GPUs of TestScheduler's compute node: Slurm's node has schedGPUs H100s (the NodeSet's
// gpuType, and the GFD product label on the Kubernetes node that pods pin); the Kubernetes node
// advertises schedNodeGPUs, the compute pod's schedGPUs and room for the test's pods beside
// them. A placeholder pod's GPUs count in both (docs/scheduler.md, Limits): on a real machine
// the compute pod would hold them all and no GPU pod would fit in Kubernetes' view. Room for
// 9 more lets Slurm, not Kubernetes, be the one to say no to the pod that asks for 9.
const (
	schedGPUs     = 8
	schedNodeGPUs = schedGPUs + 9
	h100Product   = "NVIDIA-H100-80GB-HBM3"
)

// schedulerNodeSetYAML is TestScheduler's NodeSet: one compute node with schedGPUs fake H100s.
func schedulerNodeSetYAML() string {
	return fmt.Sprintf(`nodeSets:
  - name: compute
    mode: Replicas
    replicas: 1
    gpuType: h100
    resources: {limits: {nvidia.com/gpu: %d}}
    services: [{name: fake-gpus, type: oneshot, run: %q}]
`, schedGPUs, fakeGPUDevices(schedGPUs))
}

// gpuPods (issue 18): a plain pod for sunk-scheduler pinned to H100s (nodeSelector on GFD's
// nvidia.com/gpu.product) and asking for nvidia.com/gpu: 2 gets a running Slurm job holding
// gres/gpu:h100:2 on compute-0 (not exclusive: the other six stay free), is bound to its node
// and runs; deleting it cancels the job. A pod asking for 9 (the node has 8) is refused by Slurm, says so in its
// condition and a SlurmSubmitFailed event, and is not submitted again when kube-scheduler tries
// it again (the queue's five-minute flush): one Slurm job in all.
func (h *helmEnv) gpuPods(t *testing.T, login, nodeName string) {
	t.Helper()
	ctx := context.Background()
	gpuPod := func(name string, n int) *corev1.Pod {
		pod := busyboxPod(name, "sleep 3600")
		pod.Spec.SchedulerName = "sunk-scheduler"
		// Not the whole node: an exclusive job (the default) is given every GPU of its node
		// (JOB_GRES=gpu:h100:8 for a request of 2, seen on 26.05), as Slurm does for --exclusive.
		pod.Annotations = map[string]string{annotationExclusive: "false"}
		pod.Spec.NodeSelector = map[string]string{wellknown.LabelGPUProduct: h100Product}
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{wellknown.ResourceGPU: resource.MustParse(fmt.Sprint(n))},
		}
		if _, err := h.Clientset.CoreV1().Pods(h.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	if out := h.mustSh(t, login, "sinfo -h -N -n compute-0 -o %G"); !strings.HasPrefix(strings.TrimSpace(out), fmt.Sprintf("gpu:h100:%d", schedGPUs)) {
		t.Fatalf("compute-0's GRES: %q, want gpu:h100:%d", out, schedGPUs)
	}

	created := time.Now()
	gpuPod("gpus", 2)
	bound := waitPod(t, h.Clientset, h.ns, "gpus", 3*time.Minute, func(p *corev1.Pod) (bool, error) {
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("pod ended: %s", p.Status.Phase)
		}
		return p.Status.Phase == corev1.PodRunning, nil
	})
	job := bound.Annotations[taintSlurmJob]
	t.Logf("GPU pod running on %s %s after creation, Slurm job %q", bound.Spec.NodeName, time.Since(created).Round(100*time.Millisecond), job)
	if bound.Spec.NodeName != nodeName || job == "" {
		t.Fatalf("GPU pod on %q with job %q, want node %s and a job", bound.Spec.NodeName, job, nodeName)
	}
	show := h.mustSh(t, login, "scontrol -d show job "+job)
	t.Logf("scontrol -d show job %s:\n%s", job, show)
	for _, want := range []string{"JobState=RUNNING", "NodeList=compute-0", "TresPerNode=gres/gpu:h100:2", "JOB_GRES=gpu:h100:2", "GRES=gpu:h100:2(IDX:"} {
		if !strings.Contains(show, want) {
			t.Errorf("the GPU pod's job %s lacks %q", job, want)
		}
	}
	if used := strings.TrimSpace(h.mustSh(t, login, "sinfo -h -N -n compute-0 -O GresUsed:60 | sort -u")); !strings.HasPrefix(used, "gpu:h100:2(IDX:") {
		t.Errorf("compute-0's GPUs in use: %q, want gpu:h100:2", used)
	}

	deleted := time.Now()
	if err := h.Clientset.CoreV1().Pods(h.ns).Delete(ctx, "gpus", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if state, _, _ := h.jobEnd(t, login, job, time.Minute); state != "CANCELLED" {
		t.Errorf("the GPU pod's job %s after deleting the pod: %s, want CANCELLED", job, state)
	}
	t.Logf("GPU pod deleted → job cancelled in %s", time.Since(deleted).Round(100*time.Millisecond))

	// Nine GPUs where the node has eight: Slurm refuses the job.
	big := gpuPod("gpus9", 9)
	refused := time.Now()
	var condition string
	waitPod(t, h.Clientset, h.ns, "gpus9", 2*time.Minute, func(p *corev1.Pod) (bool, error) {
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("bound to %s", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "Slurm refused the job") {
				condition = c.Message
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("9-GPU pod: %s", condition)
	name := "sunk-" + h.ns + "-gpus9"
	jobsSeen := map[string]bool{}
	jobsOf := func() {
		for _, id := range strings.Fields(h.mustSh(t, login, "squeue -h -t all -n "+name+" -o %i")) {
			jobsSeen[id] = true
		}
	}
	jobsOf()
	if !h.hasEvent(t, big.Name, "SlurmSubmitFailed") {
		t.Errorf("no SlurmSubmitFailed event for pod gpus9")
	}
	// kube-scheduler tries the pod again at once when a compute pod's labels change (an event the
	// plugin registers), instead of at its five-minute flush: every job seen under the pod's
	// name is collected, so a second submission would show as a second job id.
	h.nudgeComputePod(t)
	poll(t, 2*time.Minute, "kube-scheduler's second attempt at pod gpus9", func() error {
		jobsOf()
		if n := h.schedulingAttempts(t, big.Name, "Slurm refused the job"); n < 2 {
			return fmt.Errorf("%d attempts showing the refusal", n)
		}
		return nil
	})
	jobsOf()
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range jobsSeen {
			if !yield(id) {
				return
			}
		}
	})
	t.Logf("9-GPU pod: Slurm jobs %v over %s and two scheduling attempts", ids, time.Since(refused).Round(time.Second))
	if len(ids) > 1 {
		t.Errorf("the refused pod was submitted %d times: jobs %v", len(ids), ids)
	}
	if err := h.Clientset.CoreV1().Pods(h.ns).Delete(ctx, "gpus9", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := strings.TrimSpace(h.mustSh(t, login, "squeue -h -n "+name+" -o %i")); out != "" {
		t.Errorf("live jobs of the refused pod: %q", out)
	}
}

// nudgeComputePod changes a label of one of the namespace's compute pods: kube-scheduler then
// tries again the pods SunkSlurm rejected (Plugin.EventsToRegister).
func (h *helmEnv) nudgeComputePod(t *testing.T) {
	t.Helper()
	cs, ns := h.Clientset, h.ns
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: wellknown.LabelComponent + "=" + wellknown.ComponentCompute})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("compute pods of %s: %v (%d)", ns, err, len(pods.Items))
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{"e2e.sunk.dev/nudge":"%d"}}}`, time.Now().UnixNano())
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, pods.Items[0].Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// hasEvent reports whether the pod of the test's namespace has an event of reason.
func (h *helmEnv) hasEvent(t *testing.T, pod, reason string) bool {
	t.Helper()
	for _, ev := range h.podEvents(t, pod) {
		if ev.Reason == reason {
			return true
		}
	}
	return false
}

// schedulingAttempts counts kube-scheduler's failed attempts at the pod whose note contains
// substr: its FailedScheduling events, each repeat counted in the event's series.
func (h *helmEnv) schedulingAttempts(t *testing.T, pod, substr string) int32 {
	t.Helper()
	var n int32
	for _, ev := range h.podEvents(t, pod) {
		if ev.Reason != "FailedScheduling" || !strings.Contains(ev.Note, substr) {
			continue
		}
		if ev.Series != nil {
			n += ev.Series.Count
		} else {
			n++
		}
	}
	return n
}

func (h *helmEnv) podEvents(t *testing.T, pod string) []eventsv1.Event {
	t.Helper()
	var events eventsv1.EventList
	if err := h.c.List(context.Background(), &events, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, ev := range events.Items {
		if ev.Regarding.Kind == "Pod" && ev.Regarding.Name == pod {
			out = append(out, ev)
		}
	}
	return out
}

// waitUnlocked waits until the node carries no sunk-scheduler node lock.
func (h *helmEnv) waitUnlocked(t *testing.T, nodeName string) {
	t.Helper()
	poll(t, time.Minute, "taint lifted", func() error {
		node, err := h.Clientset.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := taintValue(node); ok {
			return fmt.Errorf("taints %v", node.Spec.Taints)
		}
		return nil
	})
}

// labelNode sets a label on the test's node until the test ends.
func (e *operatorEnv) labelNode(t *testing.T, key, value string) {
	t.Helper()
	e.setNodeLabel(t, e.NodeName, key, value)
	t.Cleanup(func() { e.setNodeLabel(t, e.NodeName, key, "") })
}
