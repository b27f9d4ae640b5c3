package render

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

func TestShapeOf(t *testing.T) {
	gpu := &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: sunkv1.NodeSetSpec{
		Features: []string{"a100"}, Weight: ptr.To(int32(5)),
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"),
			corev1.ResourceMemory: resource.MustParse("256Gi"), ResourceGPU: resource.MustParse("8")}}}}
	for _, tc := range []struct {
		name  string
		ns    *sunkv1.NodeSet
		extra string
		want  NodeShape
	}{
		{"from the resources", gpu, "", NodeShape{CPUs: 32, MemoryMB: 261120, GPUs: 8, Features: []string{"gpu", "a100"}, Weight: 5}},
		{"extraConf's keys replace sunk's", gpu, "CPUs=16 Weight=9 Gres=gpu:h100:4,nic:1", NodeShape{CPUs: 16, MemoryMB: 261120, GPUs: 4, Features: []string{"gpu", "a100"}, Weight: 9}},
		{"a Gres sunk cannot read", gpu, "Gres=gpu:a:b:c", NodeShape{CPUs: 32, MemoryMB: 261120, GPUs: -1, Features: []string{"gpu", "a100"}, Weight: 5}},
		{"nothing stated", &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Name: "cpu"}}, "", NodeShape{Features: []string{"cpu"}, Weight: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns.DeepCopy()
			ns.Spec.ExtraConf = tc.extra
			if got := ShapeOf(ns); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ShapeOf = %+v, want %+v", got, tc.want)
			}
		})
	}
	for gres, want := range map[string]int64{"": 0, "gres/gpu:2": 2, "gres/gpu:a100:2,gres/nic:1": 2, "gpu:a100:4(S:0-1),gpu:h100:2": 6, "gpu:x:y:z": -1} {
		if got := GPUsOf(gres); got != want {
			t.Errorf("GPUsOf(%q) = %d, want %d", gres, got, want)
		}
	}
}
