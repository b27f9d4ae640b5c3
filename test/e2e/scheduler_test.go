//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sunk.dev/sunk/pkg/wellknown"
)

// Names the scheduler's plugin uses (scheduler/plugin: another module, not imported here).
const (
	taintSlurmJob       = "sunk.dev/slurm-job" // node lock taint; also the pod annotation naming its job
	annotationPartition = "sunk.dev/partition"
	annotationExclusive = "sunk.dev/exclusive"
)

// TestScheduler takes sunk-scheduler through the charts: a Slurm cluster with partitions batch
// (default, tier 1) and urgent (tier 10) on one compute node and partition_prio/CANCEL
// preemption; a batch job fills the node; a plain Kubernetes pod for sunk-scheduler in partition
// urgent preempts it, is bound to the Kubernetes node hosting that Slurm node and runs there;
// while it runs the node carries the sunk.dev/slurm-job taint and a default-scheduler pod stays
// Pending; deleting the pod ends its Slurm job and lifts the taint (and the waiting pod runs).
// The compute node has eight (fake) H100s: a pod asking for two gets them as gres/gpu:h100:2,
// a pod asking for nine is refused once (gpuPods). Then the seeds' day (seedsDay) on an
// autoscaled NodeSet train of partitions train and serve: a training job, an inference
// Deployment scaled 0 → 2 → 0 that preempts it, the job requeued and run again. Then a gang
// across the three machines (gangAcrossMachines), a JobSet and a LeaderWorkerSet made by
// their real controllers, installed beside the Slurm cluster's start (workloadGangs), and a
// JobSet preempted by a higher tier that its controller restarts, bound again as one gang
// (jobSetPreempted), and a scheduler-plugins PodGroup of minMember 3 with four pods
// (podGroupOnMachines).
//
// The local cluster has one kubelet node, so NodeSet compute has one Slurm node: the batch job
// fills it, and "bound to the node hosting its Slurm node" is the only node there is, checked
// against the compute pod's node and the job's NodeList anyway.
func TestScheduler(t *testing.T) {
	h := startCharts(t)
	ctx := context.Background()
	const release = "sched"
	h.slurmRelease = release
	// The JobSet and LeaderWorkerSet controllers install beside the Slurm cluster's start
	// (workloadGangs uses them).
	workloadsReady := h.workloadControllers(t)

	// The node has fake GPUs for the test's duration (gpuPods): the compute pod holds eight.
	h.advertiseGPUs(t, schedNodeGPUs)
	h.labelNode(t, wellknown.LabelGPUProduct, h100Product)

	// The test's namespace may use partition urgent and preempt with it (sunk-scheduler's
	// policy; without it the pod would be refused).
	login := h.installSlurm(t, release, fmt.Sprintf(`image: {pullPolicy: Never}
preemption: {type: partition_prio, mode: CANCEL}
partitions:
  - {name: batch, default: true, nodeSets: [compute], priorityTier: 1}
  - {name: urgent, nodeSets: [compute], priorityTier: 10}
`+seedsDayPartitions+widePartition+`schedulerPolicy:
  tenants:
    - {name: e2e, namespaces: [%s], partitions: [urgent, serve, wide, widebatch], preempt: true}
`, h.ns)+schedulerNodeSetYAML()+seedsDayValues+wideValues, "compute-0")
	if out := h.mustSh(t, login, "scontrol show config | grep -E '^Preempt(Type|Mode)'"); !strings.Contains(out, "preempt/partition_prio") || !strings.Contains(out, "CANCEL") {
		t.Fatalf("slurmctld's preemption: %q", out)
	}

	// The PodGroup CRD before the scheduler: it reads PodGroups from its start (podGroupOnMachines).
	h.podGroupCRD(t)

	// The scheduler is enabled once the cluster exists (it reads the cluster's JWT key Secret):
	// a helm upgrade of sunk, as a user would do it.
	start := time.Now()
	if _, err := h.helm(t, "upgrade", h.sunkRelease, "charts/sunk", "-n", h.sunkNS, "--reuse-values", "--wait", "--timeout", "3m",
		"--set", "scheduler.enabled=true", "--set", "scheduler.cluster.name="+release, "--set", "scheduler.cluster.namespace="+h.ns); err != nil {
		t.Fatal(err)
	}
	t.Logf("sunk-scheduler ready %s after the helm upgrade that enabled it", time.Since(start).Round(100*time.Millisecond))

	// The compute pod's node, and the node lock lifted from it whatever happens (the node is
	// shared with every other test).
	compute := &corev1.Pod{}
	if err := h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: "compute-0"}, compute); err != nil {
		t.Fatal(err)
	}
	nodeName := compute.Spec.NodeName
	t.Cleanup(func() { untaint(t, h, nodeName) })

	// A batch job fills the node.
	batch := h.sbatch(t, login, "-p batch -N1 --exclusive -J filler --wrap 'sleep 3600'")

	// A plain pod for sunk-scheduler in partition urgent.
	pod := busyboxPod("urgent", "sleep 3600")
	pod.Spec.SchedulerName = "sunk-scheduler"
	pod.Annotations = map[string]string{annotationPartition: "urgent"}
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
	}
	created := time.Now()
	if _, err := h.Clientset.CoreV1().Pods(h.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bound := waitPod(t, h.Clientset, h.ns, "urgent", 3*time.Minute, func(p *corev1.Pod) (bool, error) {
		return p.Spec.NodeName != "", nil
	})
	bindTime := time.Since(created)
	job := bound.Annotations[taintSlurmJob]
	t.Logf("pod urgent bound to %s %s after creation, Slurm job %q", bound.Spec.NodeName, bindTime.Round(100*time.Millisecond), job)
	if bound.Spec.NodeName != nodeName {
		t.Errorf("pod bound to %s, want %s (the node of compute-0)", bound.Spec.NodeName, nodeName)
	}
	if job == "" {
		t.Fatalf("the bound pod has no %s annotation: %v", taintSlurmJob, bound.Annotations)
	}
	if out := h.mustSh(t, login, "squeue -h -j "+job+" -o '%T %P %N'"); strings.TrimSpace(out) != "RUNNING urgent compute-0" {
		t.Errorf("the pod's job %s: %q, want RUNNING urgent compute-0", job, out)
	}

	// The batch job was preempted (PreemptMode=CANCEL).
	state, _, end := h.jobEnd(t, login, batch, time.Minute)
	if state != "PREEMPTED" && state != "CANCELLED" {
		t.Errorf("batch job %s after the urgent pod: %s, want PREEMPTED or CANCELLED", batch, state)
	}
	t.Logf("batch job %s %s at %s, %s after the pod's creation", batch, state, end.Format(time.TimeOnly), end.Sub(created.UTC().Truncate(time.Second)))

	waitPod(t, h.Clientset, h.ns, "urgent", 2*time.Minute, func(p *corev1.Pod) (bool, error) {
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("pod ended: %s", p.Status.Phase)
		}
		return p.Status.Phase == corev1.PodRunning, nil
	})

	// The node lock: the taint names the job; a default-scheduler pod does not tolerate it.
	node, err := h.Clientset.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := taintValue(node); !ok || v != job {
		t.Errorf("node %s taints %v, want %s=%s:NoSchedule", nodeName, node.Spec.Taints, taintSlurmJob, job)
	}
	plain := busyboxPod("plain", "true")
	if _, err := h.Clientset.CoreV1().Pods(h.ns).Create(ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, h.Clientset, h.ns, "plain", time.Minute, func(p *corev1.Pod) (bool, error) {
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("plain pod bound to %s despite the node lock", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				if !strings.Contains(c.Message, taintSlurmJob) {
					return false, fmt.Errorf("unschedulable for another reason: %s", c.Message)
				}
				return true, nil
			}
		}
		return false, nil
	})

	h.tenancyHolds(t, login, job)

	// Deleting the pod ends its job and lifts the lock; the waiting plain pod then runs.
	deleted := time.Now()
	if err := h.Clientset.CoreV1().Pods(h.ns).Delete(ctx, "urgent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if state, _, _ := h.jobEnd(t, login, job, time.Minute); state != "CANCELLED" {
		t.Errorf("the pod's job %s after deleting the pod: %s, want CANCELLED", job, state)
	}
	h.waitUnlocked(t, nodeName)
	t.Logf("pod deleted → job cancelled and taint lifted in %s", time.Since(deleted).Round(100*time.Millisecond))
	waitPod(t, h.Clientset, h.ns, "plain", 2*time.Minute, podSucceeded)
	poll(t, time.Minute, "urgent pod gone", func() error {
		_, err := h.Clientset.CoreV1().Pods(h.ns).Get(ctx, "urgent", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})

	h.gpuPods(t, login, nodeName)

	h.seedsDay(t, login)

	h.gangAcrossMachines(t, login)

	workloadsReady()
	h.workloadGangs(t, login)
	h.jobSetPreempted(t, login)
	h.podGroupOnMachines(t, login)

	h.schedulerNotForbidden(t)
	h.uninstall(t)
}

// tenancyHolds (issue 21): a Slurm user who copies the running pod's job comment onto a held job
// of their own changes nothing for the pod or its job; a pod of a namespace no tenant of the
// policy lists is refused partition urgent with a condition naming the policy, and gets no job.
func (h *helmEnv) tenancyHolds(t *testing.T, login, job string) {
	t.Helper()
	ctx := context.Background()
	comment := strings.TrimSpace(h.mustSh(t, login, "squeue -h -j "+job+" -o %k"))
	if !strings.Contains(comment, ";mark=v1.") {
		t.Fatalf("the pod's job %s has comment %q, want a marked one", job, comment)
	}
	// The comment is letters, digits and :;=.-_ only: safe in single quotes.
	forged := strings.TrimSpace(h.mustSh(t, login, fmt.Sprintf(
		"runuser -u nobody -- sbatch --parsable -D /tmp -o /dev/null -p batch --hold -J forged --comment='%s' --wrap true", comment)))
	t.Cleanup(func() { _, _ = h.sh(t, login, "login", "scancel "+forged) })
	if !jobIDRe.MatchString(forged) {
		t.Fatalf("sbatch as nobody printed %q", forged)
	}
	// The scheduler logs each job it ignores, once: after that line its passes have seen it.
	ignored := "job=" + forged + ` user="nobody" why="owner"`
	poll(t, time.Minute, "the scheduler ignores the copy", func() error {
		if !strings.Contains(h.schedulerLogs(t), ignored) {
			return fmt.Errorf("no log line with %s", ignored)
		}
		return nil
	})
	if p, err := h.Clientset.CoreV1().Pods(h.ns).Get(ctx, "urgent", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil || p.Annotations[taintSlurmJob] != job {
		t.Fatalf("the victim pod after the copy: %v (error %v)", p, err)
	}
	for id, want := range map[string]string{job: "RUNNING", forged: "PENDING"} {
		if out := strings.TrimSpace(h.mustSh(t, login, "squeue -h -j "+id+" -o %T")); out != want {
			t.Fatalf("job %s after the copy: %q, want %s", id, out, want)
		}
	}

	other := h.ns + "-b"
	if _, err := h.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Clientset.CoreV1().Namespaces().Delete(context.Background(), other, metav1.DeleteOptions{})
	})
	pod := busyboxPod("refused", "sleep 3600")
	pod.Spec.SchedulerName = "sunk-scheduler"
	pod.Annotations = map[string]string{annotationPartition: "urgent"}
	if _, err := h.Clientset.CoreV1().Pods(other).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, h.Clientset, other, "refused", time.Minute, func(p *corev1.Pod) (bool, error) {
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("bound to %s", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == "SlurmPolicyDenied" {
				if !strings.Contains(c.Message, "spec.schedulerPolicy: namespace "+other+" (in no tenant) may not use partition \"urgent\"") {
					return false, fmt.Errorf("refused for another reason: %s", c.Message)
				}
				return true, nil
			}
		}
		return false, nil
	})
	if out := strings.TrimSpace(h.mustSh(t, login, "squeue -h -n sunk-"+other+"-refused -o %i")); out != "" {
		t.Fatalf("the refused pod got Slurm jobs %q", out)
	}
	if p, err := h.Clientset.CoreV1().Pods(h.ns).Get(ctx, "urgent", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("the running pod after the refusal: %v (error %v)", p, err)
	}
}

// schedulerLogs is the scheduler pod's log.
func (h *helmEnv) schedulerLogs(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	// In sunk's namespace, not the SlurmCluster's (docs/security.md).
	pods, err := h.Clientset.CoreV1().Pods(h.sunkNS).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/component=scheduler,app.kubernetes.io/instance=" + h.sunkRelease})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the scheduler's pod: %v %d", err, len(pods.Items))
	}
	logs, err := h.Clientset.CoreV1().Pods(h.sunkNS).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(logs)
}

// schedulerNotForbidden fails on any request the chart's RBAC refused the scheduler, but the
// one kube-scheduler tolerates by design: the client-CA ConfigMap in kube-system (delegated
// authentication of /metrics callers by client certificate; tokens still work).
func (h *helmEnv) schedulerNotForbidden(t *testing.T) {
	t.Helper()
	for _, l := range strings.Split(h.schedulerLogs(t), "\n") {
		if strings.Contains(l, "forbidden") && !strings.Contains(l, "extension-apiserver-authentication") {
			t.Errorf("sunk-scheduler was refused: %s", l)
		}
	}
}

var jobIDRe = regexp.MustCompile(`^\d+$`)

// taintValue returns the node lock's value (a job id) if the node carries it.
func taintValue(n *corev1.Node) (string, bool) {
	for _, tt := range n.Spec.Taints {
		if tt.Key == taintSlurmJob && tt.Effect == corev1.TaintEffectNoSchedule && jobIDRe.MatchString(tt.Value) {
			return tt.Value, true
		}
	}
	return "", false
}

// untaint removes a node lock left behind (a failed run) from the shared node.
func untaint(t *testing.T, h *helmEnv, name string) {
	ctx := context.Background()
	node, err := h.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("node %s: %v", name, err)
		return
	}
	var keep []corev1.Taint
	for _, tt := range node.Spec.Taints {
		if tt.Key != taintSlurmJob {
			keep = append(keep, tt)
		}
	}
	if len(keep) == len(node.Spec.Taints) {
		return
	}
	node.Spec.Taints = keep
	if _, err := h.Clientset.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Errorf("removing %s from %s: %v", taintSlurmJob, name, err)
	}
}
