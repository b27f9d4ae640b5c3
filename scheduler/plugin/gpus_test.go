package plugin

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
)

// podYAML is a pod manifest as a user writes it (only its spec varies here).
func podYAML(t *testing.T, spec string) *v1.Pod {
	t.Helper()
	manifest := "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u1}\nspec:\n" + spec
	var p v1.Pod
	if err := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096).Decode(&p); err != nil {
		t.Fatalf("%v\n%s", err, manifest)
	}
	return &p
}

// What a pod's GPUs make its job ask Slurm for per node: Kubernetes' count (init containers'
// largest against the sum of the others, sidecars added, a limit standing for a missing
// request), typed when the pod pins a product, as the operator names the type.
func TestPodGres(t *testing.T) {
	for _, c := range []struct{ name, spec, want string }{
		{"no GPUs", `
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]`, ""},
		{"zero GPUs", `
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 0}}}]`, ""},
		{"limit only, as the device plugin's docs write it", `
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 2}}}]`, "gres/gpu:2"},
		{"request and limit", `
  containers: [{name: c, resources: {requests: {nvidia.com/gpu: 2}, limits: {nvidia.com/gpu: 2}}}]`, "gres/gpu:2"},
		{"app containers add up", `
  containers:
  - {name: a, resources: {limits: {nvidia.com/gpu: 1}}}
  - {name: b, resources: {limits: {nvidia.com/gpu: 2}}}`, "gres/gpu:3"},
		{"an init container larger than the app containers", `
  initContainers: [{name: warm, resources: {limits: {nvidia.com/gpu: 4}}}]
  containers:
  - {name: a, resources: {limits: {nvidia.com/gpu: 1}}}
  - {name: b, resources: {limits: {nvidia.com/gpu: 1}}}`, "gres/gpu:4"},
		{"an init container smaller than the app containers", `
  initContainers: [{name: warm, resources: {limits: {nvidia.com/gpu: 1}}}]
  containers: [{name: a, resources: {limits: {nvidia.com/gpu: 2}}}]`, "gres/gpu:2"},
		{"a sidecar runs beside the app: added", `
  initContainers: [{name: side, restartPolicy: Always, resources: {limits: {nvidia.com/gpu: 1}}}]
  containers: [{name: a, resources: {limits: {nvidia.com/gpu: 2}}}]`, "gres/gpu:3"},
		{"nodeSelector pins H100", `
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 2}}}]`, "gres/gpu:h100:2"},
		{"nodeSelector pins a model without alias", `
  nodeSelector: {nvidia.com/gpu.product: Tesla-T4}
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]`, "gres/gpu:tesla_t4:1"},
		{"a product that cannot be a type: untyped, as the operator registers it", `
  nodeSelector: {nvidia.com/gpu.product: 3090-Ti}
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]`, "gres/gpu:1"},
		{"a pinned product without GPUs asks for none", `
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
  containers: [{name: c}]`, ""},
		{"required affinity, one In value", `
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [
    {matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]},
                        {key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-A100-SXM4-80GB]}]}]}}}
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 8}}}]`, "gres/gpu:a100:8"},
		{"required affinity, two In values: untyped", `
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [
    {matchExpressions: [{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3]}]}]}}}
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 8}}}]`, "gres/gpu:8"},
		{"two terms, the same product", `
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [
    {matchExpressions: [{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H100-80GB-HBM3]}, {key: zone, operator: In, values: [a]}]},
    {matchExpressions: [{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H100-80GB-HBM3]}, {key: zone, operator: In, values: [b]}]}]}}}
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]`, "gres/gpu:h100:1"},
		{"two terms, another product in one: untyped", `
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [
    {matchExpressions: [{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H100-80GB-HBM3]}]},
    {matchExpressions: [{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H200]}]}]}}}
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]`, "gres/gpu:1"},
		{"NotIn pins nothing", `
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [
    {matchExpressions: [{key: nvidia.com/gpu.product, operator: NotIn, values: [NVIDIA-H100-80GB-HBM3]}]}]}}}
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]`, "gres/gpu:1"},
		{"preferred affinity pins nothing", `
  affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, preference:
    {matchExpressions: [{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H100-80GB-HBM3]}]}}]}}
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]`, "gres/gpu:1"},
	} {
		s, err := parsePod(podYAML(t, c.spec))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if s.Job.GRES != c.want {
			t.Errorf("%s: GRES %q, want %q", c.name, s.Job.GRES, c.want)
		}
	}
}

// A GPU quantity the device plugin could not grant is the pod's error, naming the container
// and the field, and no job.
func TestPodGresRefusesBadQuantities(t *testing.T) {
	for _, c := range []struct{ name, spec, want string }{
		{"fraction", `
  containers: [{name: train, resources: {limits: {nvidia.com/gpu: "1.5"}}}]`, `container "train": nvidia.com/gpu limits="1500m": want a whole number`},
		{"milli", `
  containers: [{name: train, resources: {requests: {nvidia.com/gpu: 500m}}}]`, `container "train": nvidia.com/gpu requests="500m"`},
		{"negative", `
  containers: [{name: train, resources: {requests: {nvidia.com/gpu: "-1"}, limits: {nvidia.com/gpu: "-1"}}}]`, `nvidia.com/gpu limits="-1"`},
		{"in an init container", `
  initContainers: [{name: warm, resources: {limits: {nvidia.com/gpu: "0.5"}}}]
  containers: [{name: train}]`, `container "warm"`},
	} {
		_, err := parsePod(podYAML(t, c.spec))
		var re *resourceError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want a resourceError containing %q", c.name, err, c.want)
		}
	}
}

// What reaches slurmrestd: a pod pinned to H100s asking for two gets tres_per_node
// gres/gpu:h100:2; a pod asking for half a GPU gets an unresolvable status naming the field, one
// InvalidResources event, and no job.
func TestGPUPodSubmission(t *testing.T) {
	ctx := context.Background()
	fk := slurmfake.New()
	w := newHookClient(t, fk, true)
	b := newTestBed(t, 2, w, fk)
	// GPU Feature Discovery's label on the node the pod's selector asks for.
	b.addNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "k3", Labels: map[string]string{wellknown.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"}}})
	fk.AddNode(slurm.Node{Name: "n3"})
	b.addPod(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "n3", Namespace: "slurm", UID: "compute-3",
			Labels: map[string]string{wellknown.LabelCluster: "c1", wellknown.LabelComponent: wellknown.ComponentCompute}},
		Spec: v1.PodSpec{NodeName: "k3"},
	})
	b.poll(b.p)
	pod := b.addPod(podYAML(t, `
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 2}}}]`))
	b.p.PreEnqueue(ctx, pod)
	body := string(receive(t, w.bodies, "submission of the GPU pod"))
	if !strings.Contains(body, `"tres_per_node":"gres/gpu:h100:2"`) {
		t.Fatalf("submission %s, want tres_per_node gres/gpu:h100:2", body)
	}

	bad := podYAML(t, `
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 500m}}}]`)
	bad.Name, bad.UID = "bad", "u-bad"
	bad = b.addPod(bad)
	for range 2 { // reported once
		if _, st := b.p.PreFilter(ctx, framework.NewCycleState(), bad); st.Code() != framework.UnschedulableAndUnresolvable ||
			!strings.Contains(st.Message(), `nvidia.com/gpu limits="500m"`) {
			t.Fatalf("PreFilter: %v", st)
		}
	}
	events := 0
	for len(b.h.rec.Events) > 0 {
		if e := <-b.h.rec.Events; strings.Contains(e, "InvalidResources") {
			events++
		}
	}
	if events != 1 {
		t.Fatalf("%d InvalidResources events, want 1", events)
	}
	select {
	case body := <-w.bodies:
		t.Fatalf("a pod with half a GPU was submitted: %s", body)
	default:
	}
}
