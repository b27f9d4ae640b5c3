package kube

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RolledOut returns a StatefulSet's or Deployment's pod template, and whether every replica
// runs that template and is ready (for a Deployment: available). Other objects: an empty
// template, true.
func RolledOut(o client.Object) (*corev1.PodTemplateSpec, bool) {
	switch w := o.(type) {
	case *appsv1.StatefulSet:
		want := ptr.Deref(w.Spec.Replicas, 1)
		return &w.Spec.Template, w.Status.ObservedGeneration >= w.Generation && w.Status.UpdateRevision == w.Status.CurrentRevision &&
			w.Status.UpdatedReplicas == want && w.Status.ReadyReplicas == want && w.Status.Replicas == want
	case *appsv1.Deployment:
		want := ptr.Deref(w.Spec.Replicas, 1)
		return &w.Spec.Template, w.Status.ObservedGeneration >= w.Generation &&
			w.Status.UpdatedReplicas == want && w.Status.AvailableReplicas == want && w.Status.Replicas == want
	}
	return &corev1.PodTemplateSpec{}, true
}
