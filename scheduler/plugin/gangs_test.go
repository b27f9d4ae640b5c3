package plugin

import v1 "k8s.io/api/core/v1"

// parsePod is specOf for a pod alone (no plugin, so no workload caches): the tests' way to read
// a pod's spec.
func parsePod(pod *v1.Pod) (*podSpec, error) {
	g, from, err := readGang(pod)
	return specFor(pod, g, from, err)
}
