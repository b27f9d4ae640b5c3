package nodeset

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
)

// computeRelease holds compute pods on slurmctld's release while slurmctld is being upgraded,
// and lets them move once every slurmctld replica runs the spec's release.
func TestComputeRelease(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = sunkv1.AddToScheme(scheme)
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Spec: sunkv1.SlurmClusterSpec{SlurmVersion: "26.05", Image: "slurm:26.05"}}
	ctld := func(label, image string, ready bool) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-controller", Generation: 1},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(1)), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "slurmctld", Image: image}}}}},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, CurrentRevision: "a", UpdateRevision: "a"}}
		if label != "" {
			s.Spec.Template.Labels[wellknown.LabelSlurmVersion] = label
		}
		if ready {
			s.Status.ReadyReplicas = 1
		} else {
			s.Status.UpdateRevision = "b"
		}
		return s
	}
	pod := func(name, component, label, container, image string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{wellknown.LabelCluster: "c", wellknown.LabelComponent: component, wellknown.LabelNodeSet: "cpu"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: image}}}}
		if component == wellknown.ComponentController {
			delete(p.Labels, wellknown.LabelNodeSet)
		}
		if label != "" {
			p.Labels[wellknown.LabelSlurmVersion] = label
		}
		return p
	}
	for _, tc := range []struct {
		name      string
		objs      []client.Object
		nsImage   string
		wantHeld  bool
		wantImage string
		wantV     string
	}{
		{name: "new cluster, no slurmctld yet", wantImage: "slurm:26.05", wantV: "26.05"},
		{name: "settled", objs: []client.Object{ctld("26.05", "slurm:26.05", true)}, wantImage: "slurm:26.05", wantV: "26.05"},
		{name: "starting, not an upgrade", objs: []client.Object{ctld("26.05", "slurm:26.05", false), pod("c-controller-0", wellknown.ComponentController, "26.05", "slurmctld", "slurm:26.05")},
			wantImage: "slurm:26.05", wantV: "26.05"},
		{name: "slurmctld still on 24.11 (slurmdbd first): the compute pods' own image of 24.11",
			objs:     []client.Object{ctld("", "slurm:24.11", true), pod("cpu-0", wellknown.ComponentCompute, "", "slurmd", "mine:24.11")},
			wantHeld: true, wantImage: "mine:24.11", wantV: ""},
		{name: "slurmctld rolling to 26.05, its pod still 24.11: slurmctld's old image",
			objs:     []client.Object{ctld("26.05", "slurm:26.05", false), pod("c-controller-0", wellknown.ComponentController, "24.11", "slurmctld", "slurm:24.11")},
			wantHeld: true, wantImage: "slurm:24.11", wantV: "24.11"},
		{name: "a NodeSet with its own image is its owner's", objs: []client.Object{ctld("", "slurm:24.11", true)}, nsImage: "own:1",
			wantImage: "slurm:26.05", wantV: "26.05"},
	} {
		r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objs...).Build()}
		ns := &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cpu"}, Spec: sunkv1.NodeSetSpec{ClusterRef: "c", Image: sunkv1.Image(tc.nsImage)}}
		got, held, err := r.computeRelease(context.Background(), ns, sc)
		if err != nil || held != tc.wantHeld || string(got.Spec.Image) != tc.wantImage || got.Spec.SlurmVersion != tc.wantV {
			t.Errorf("%s: held %v image %q release %q (%v); want held %v image %q release %q", tc.name, held, got.Spec.Image, got.Spec.SlurmVersion, err,
				tc.wantHeld, tc.wantImage, tc.wantV)
		}
	}
}
