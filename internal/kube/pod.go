package kube

import corev1 "k8s.io/api/core/v1"

// PodReady reports a pod that exists, is not being deleted and has condition Ready=True.
func PodReady(p *corev1.Pod) bool {
	if p == nil || !p.DeletionTimestamp.IsZero() {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
