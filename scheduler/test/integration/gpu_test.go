//go:build integration

package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sunk.dev/sunk/pkg/wellknown"
)

// withGPUs gives the pod's container n nvidia.com/gpu as the device plugin's docs write it: a
// limit, which the apiserver copies into the request.
func withGPUs(n string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{wellknown.ResourceGPU: resource.MustParse(n)}
	}
}

// The test bed's slurmd nodes have no GPUs (slurm.conf has GresTypes=gpu, as sunk renders it):
// a pod pinned to H100s asking for two reaches real slurmctld as the GRES request
// gres/gpu:h100:2, which Slurm reads as valid GRES and refuses for want of a node that has it.
// The refusal is the pod's: its condition and a SlurmSubmitFailed event carry Slurm's words,
// and the job slurmrestd shows is FAILED, its tres_per_node what was asked. (Without the GRES, Slurm would have run the job on a node with no GPU
// and the pod would have been bound there.)
func TestGPUPodAsksSlurmForGres(t *testing.T) {
	e := setup(t)
	host := e.hostOf[e.slurm.Nodes[0]]
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{wellknown.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().Nodes().Patch(e.ctx, host, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startScheduler("")

	const refusal = "Requested node configuration is not available"
	pod := e.createPod("gpus", withGPUs("2"), func(p *v1.Pod) {
		p.Spec.NodeSelector = map[string]string{wellknown.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"}
	})
	e.eventually("Slurm's refusal in the pod's condition", 60*time.Second, func() (bool, string) {
		c := scheduledCondition(e.getPod("gpus"))
		return strings.Contains(c, "PodScheduled=False") && strings.Contains(c, refusal), c
	})
	e.waitEvent(pod, "SlurmSubmitFailed", refusal, 10*time.Second)
	// slurmctld keeps the record of the job it refused, failed at once: what it was asked for.
	jobs := e.jobsNaming(string(pod.UID))
	if len(jobs) == 0 {
		t.Fatal("no record of the refused job")
	}
	for _, listed := range jobs {
		j := e.job(listed.ID) // GET /job/{id}
		if j.BaseState() != "FAILED" || j.TRESPerNode != "gres/gpu:h100:2" {
			t.Fatalf("job %d: %v %s, tres_per_node %q; want FAILED asking for gres/gpu:h100:2", j.ID, j.State, j.StateReason, j.TRESPerNode)
		}
		t.Logf("job %d: %v %s, tres_per_node %q", j.ID, j.State, j.StateReason, j.TRESPerNode)
	}
	if p := e.getPod("gpus"); p.Spec.NodeName != "" {
		t.Fatalf("bound to %s, which has no GPU in Slurm", p.Spec.NodeName)
	}

	// The same pod without GPUs is placed on that node: the refusal was the GRES.
	e.createPod("nogpus", func(p *v1.Pod) {
		p.Spec.NodeSelector = map[string]string{wellknown.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"}
	})
	if p := e.waitBound("nogpus", 90*time.Second); p.Spec.NodeName != host {
		t.Fatalf("nogpus bound to %s, want %s", p.Spec.NodeName, host)
	}
}
