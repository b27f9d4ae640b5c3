// A pod's GPUs, as the GRES its placeholder job asks Slurm for.

package plugin

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"sunk.dev/sunk/pkg/wellknown"
)

// resourceError names the container and the resource value that is wrong, for the pod's
// condition and an InvalidResources event.
type resourceError struct {
	Container, Field, Value, Why string
}

func (e *resourceError) Error() string {
	return fmt.Sprintf("container %q: %s %s=%q: %s", e.Container, ResourceGPU, e.Field, e.Value, e.Why)
}

// podGres is the per-node GRES of the pod's job in TRES form ("gres/gpu:h100:2"), "" without
// GPUs. Without it Slurm could start the job on a node whose GPUs other jobs hold, and the
// pod, bound there, would wait for a device plugin that has none to give.
func podGres(pod *v1.Pod) (string, error) {
	n, err := podGPUs(pod)
	if err != nil || n == 0 {
		return "", err
	}
	typ := ""
	if product := pinnedGPUProduct(pod); product != "" {
		// A product the operator cannot name registers its nodes untyped: so is the request.
		typ, _ = wellknown.GPUTypeFromProduct(product)
	}
	return "gres/" + wellknown.GPUGres(typ, n), nil
}

// podGPUs is the pod's nvidia.com/gpu as the Kubernetes scheduler counts it: the sum over app
// containers (and sidecars), or the largest init container if that is more. A container's
// limit without a request is its request, as the API server defaults it. A quantity that is
// not a whole number of GPUs, 0 or more, is an error: the device plugin could not grant it.
func podGPUs(pod *v1.Pod) (int64, error) {
	// A copy holding only the GPUs, each container's made whole, so that the counting is
	// Kubernetes' own (sidecar init containers included).
	only := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: make([]v1.Container, len(pod.Spec.InitContainers)),
		Containers:     make([]v1.Container, len(pod.Spec.Containers)),
	}}
	for _, c := range []struct {
		from, to []v1.Container
	}{{pod.Spec.InitContainers, only.Spec.InitContainers}, {pod.Spec.Containers, only.Spec.Containers}} {
		for i, ctr := range c.from {
			n, err := containerGPUs(ctr)
			if err != nil {
				return 0, err
			}
			c.to[i] = v1.Container{Name: ctr.Name, RestartPolicy: ctr.RestartPolicy}
			c.to[i].Resources.Requests = v1.ResourceList{ResourceGPU: *resource.NewQuantity(n, resource.DecimalSI)}
		}
	}
	q := resourcehelper.PodRequests(only, resourcehelper.PodResourcesOptions{SkipPodLevelResources: true})[ResourceGPU]
	return q.Value(), nil
}

func containerGPUs(c v1.Container) (int64, error) {
	var n int64
	for _, f := range []struct {
		name string
		list v1.ResourceList
	}{{"limits", c.Resources.Limits}, {"requests", c.Resources.Requests}} {
		q, ok := f.list[ResourceGPU]
		if !ok {
			continue
		}
		v, whole := q.AsInt64()
		if !whole || v < 0 {
			return 0, &resourceError{c.Name, f.name, q.String(), "want a whole number of GPUs, 0 or more"}
		}
		n = v // the request, when set, is what Kubernetes counts
	}
	return n, nil
}

// pinnedGPUProduct is the nvidia.com/gpu.product the pod requires of its node: its nodeSelector's,
// else the one value of an In requirement that every term of its required node affinity holds
// (the terms are alternatives: one that allows another product pins nothing). "" when none.
func pinnedGPUProduct(pod *v1.Pod) string {
	if v, ok := pod.Spec.NodeSelector[wellknown.LabelGPUProduct]; ok {
		return v
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	product := ""
	for i, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		v := termProduct(term)
		if v == "" || (i > 0 && v != product) {
			return ""
		}
		product = v
	}
	return product
}

// termProduct is the product a node selector term pins with a single-value In requirement (its
// requirements all hold, so one such pins the term), "" when it pins none.
func termProduct(term v1.NodeSelectorTerm) string {
	for _, r := range term.MatchExpressions {
		if r.Key == wellknown.LabelGPUProduct && r.Operator == v1.NodeSelectorOpIn && len(r.Values) == 1 {
			return r.Values[0]
		}
	}
	return ""
}
