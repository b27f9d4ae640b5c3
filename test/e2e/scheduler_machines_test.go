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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// wideLeaves are the topograph leaves of the machines NodeSet wide spans: sunk-node (leaf-0),
// sunk-node-2 and -3 (leaf-1; hack/kube-nodes.sh), not any node a larger test bed adds.
var wideLeaves = []string{"leaf-0", "leaf-1"}

// wideValues are the slurm chart's values of TestScheduler's NodeSet "wide": PerNode over the
// machines of wideLeaves, tolerating the extra nodes' taint. Not autoscaled: sunk-scheduler
// offers Slurm only the nodes whose compute pod runs on a node the pod may use, and a parked
// member has no pod yet, so a gang of pods cannot grow a NodeSet from zero (a Slurm job can).
var wideValues = `  - name: wide
    mode: PerNode
    affinity: {nodeSelectorTerms: [{matchExpressions: [{key: fabric.topograph.run/tier-1, operator: In, values: [` + strings.Join(wideLeaves, ", ") + `]}]}]}
    tolerations: [{key: testbed.sunk.dev/extra-node, operator: Exists, effect: NoSchedule}]
    resources: {requests: {cpu: 100m, memory: 400Mi}}
`

// widePartition is partition "wide" of NodeSet wide, for pods, and "widebatch", a lower tier
// on the same nodes that wide preempts (jobSetPreempted).
const widePartition = `  - {name: wide, nodeSets: [wide], priorityTier: 10}
  - {name: widebatch, nodeSets: [wide], priorityTier: 1}
`

// gangAcrossMachines (issue 38): a gang of three exclusive pods through sunk-scheduler is one
// Slurm job of three nodes of NodeSet wide, its pods bound one to each machine, each machine
// locked for that job alone; deleting the pods ends the job and lifts every lock.
func (h *helmEnv) gangAcrossMachines(t *testing.T, login string) {
	t.Helper()
	ctx := context.Background()
	machines := h.nodesOnLeaves(t, wideLeaves)
	if len(machines) != 3 {
		t.Fatalf("machines on leaves %v: %v, want 3 (hack/kube-nodes.sh)", wideLeaves, machines)
	}
	members := make([]string, len(machines))
	for i, m := range machines {
		members[i] = clusternames.PerNodeMemberName("wide", m)
	}
	h.waitIdle(t, login, 4*time.Minute, "wide's members idle", members...)

	created := time.Now()
	for i := range machines {
		h.createSmallPod(t, fmt.Sprintf("wide-%d", i), map[string]string{"app": "wide"}, map[string]string{annotationPartition: "wide",
			wellknown.AnnotationGang: "wide", wellknown.AnnotationGangSize: fmt.Sprint(len(machines))})
	}
	t.Cleanup(func() {
		_ = h.c.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(h.ns), client.MatchingLabels{"app": "wide"})
		for _, m := range machines {
			untaint(t, h, m)
		}
	})
	var job string
	bound := map[string]string{}
	poll(t, 4*time.Minute, "the gang's three pods bound, one to each machine", func() error {
		var pods corev1.PodList
		if err := h.c.List(ctx, &pods, client.InNamespace(h.ns), client.MatchingLabels{"app": "wide"}); err != nil {
			return err
		}
		bound = map[string]string{}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				return fmt.Errorf("pod %s not bound yet", p.Name)
			}
			if j := p.Annotations[taintSlurmJob]; job != "" && j != job {
				return fmt.Errorf("pods of one gang in jobs %s and %s", job, j)
			} else {
				job = j
			}
			bound[p.Spec.NodeName] = p.Name
		}
		if len(bound) != len(machines) {
			return fmt.Errorf("%d pods on machines %v", len(pods.Items), bound)
		}
		return nil
	})
	boundAfter := time.Since(created)
	for _, m := range machines {
		if bound[m] == "" {
			t.Errorf("no pod of the gang on %s (bound: %v)", m, bound)
		}
	}
	if out := h.mustSh(t, login, "squeue -h -j "+job+" -o '%T %P %D'"); strings.TrimSpace(out) != "RUNNING wide 3" {
		t.Errorf("the gang's job %s: %q, want RUNNING wide 3", job, out)
	}
	for _, m := range machines {
		node, err := h.Clientset.CoreV1().Nodes().Get(ctx, m, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := taintValue(node); !ok || v != job {
			t.Errorf("machine %s: taints %v, want the lock of job %s", m, node.Spec.Taints, job)
		}
	}

	if err := h.c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(h.ns), client.MatchingLabels{"app": "wide"}); err != nil {
		t.Fatal(err)
	}
	if state, _, _ := h.jobEnd(t, login, job, time.Minute); state != "CANCELLED" && state != "COMPLETED" {
		t.Errorf("the gang's job %s after its pods went: %s", job, state)
	}
	for _, m := range machines {
		h.waitUnlocked(t, m)
	}
	t.Logf("bench: name=gang-across-machines created_to_bound_s=%.1f", boundAfter.Seconds())
}

// createSmallPod creates a pod for sunk-scheduler of 10m CPU and 16Mi that sleeps, allowed on
// the extra machines, with the labels and annotations (its partition, gang, packing).
func (h *helmEnv) createSmallPod(t *testing.T, name string, labels, annotations map[string]string) {
	t.Helper()
	pod := busyboxPod(name, "sleep 3600")
	pod.Spec.SchedulerName = "sunk-scheduler"
	pod.Spec.Tolerations = []corev1.Toleration{extraNodeTaint}
	pod.Labels, pod.Annotations = labels, annotations
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
	}
	if _, err := h.Clientset.CoreV1().Pods(h.ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nodesOnLeaves are the real nodes whose topograph leaf label is one of leaves, sorted.
func (e *operatorEnv) nodesOnLeaves(t *testing.T, leaves []string) []string {
	t.Helper()
	leaf := wellknown.TreePresetLabels["topograph"][2]
	return e.nodeNames(t, func(n *corev1.Node) bool { return slices.Contains(leaves, n.Labels[leaf]) })
}
