// Gang membership: which gang a pod is in and how big it is, read in one place (gangOf) for
// every part of the plugin that asks: the pod's spec, the job book, the cycle and the loop.

package plugin

import (
	"fmt"
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	batchlisters "k8s.io/client-go/listers/batch/v1"

	"sunk.dev/sunk/pkg/wellknown"
)

// gangSource is where a pod's gang was read from. Two pods are in one gang when they are in
// one namespace and have the same gang name from the same source.
type gangSource string

const (
	// gangFromAnnotation: sunk.dev/gang and sunk.dev/gang-size, set by the pod's author.
	gangFromAnnotation gangSource = "annotation"
	// gangFromLeaderWorkerSet: a LeaderWorkerSet's group (lwsGang).
	gangFromLeaderWorkerSet gangSource = "LeaderWorkerSet"
	// gangFromJobSet: a JobSet's replicated job, all its Jobs (jobSetGang).
	gangFromJobSet gangSource = "JobSet"
	// gangFromPodGroup: a scheduler-plugins PodGroup (podGroupGang): its job is for minMember
	// of its pods, which may be fewer than it has (chooseMembers).
	gangFromPodGroup gangSource = "PodGroup"
)

// gang is a pod's group; the zero value means "no gang".
type gang struct {
	Name string
	Size int
}

// gangOf is the gang a pod is in (read by readGang). With an error the pod has no gang to be
// scheduled by, but the name and source are still those the pod names when it names one: a
// member whose size does not parse is still counted among its gang's pods.
func (p *Plugin) gangOf(pod *v1.Pod) (gang, gangSource, error) {
	return readGang(pod, p.workloadJobs, p.podGroups)
}

// readGang reads a pod's gang. sunk's annotations come first: a pod that has either is in the
// gang they name (or in error), whatever its workload. Without them, the pods of a
// LeaderWorkerSet group or of a JobSet's replicated job are a gang, sized as their controller made them
// (workloads.go); jobs is where a JobSet's Jobs are read. Then the pods labelled for a PodGroup
// (podgroups.go), read from groups: a label anyone may put on a pod, and one Kubeflow Trainer
// puts on a TrainJob's pods (JobSet pods) with a minMember counting every pod, initializers
// included, which run before the nodes (such a gang would never be complete), hence last.
// Every other pod has no gang.
func readGang(pod *v1.Pod, jobs batchlisters.JobLister, groups *podGroupCache) (gang, gangSource, error) {
	_, hasGang := pod.Annotations[wellknown.AnnotationGang]
	_, hasSize := pod.Annotations[wellknown.AnnotationGangSize]
	if hasGang || hasSize {
		return annotatedGang(pod)
	}
	if set := pod.Labels[wellknown.LWSLabelName]; set != "" {
		return lwsGang(pod, set)
	}
	if set := pod.Labels[wellknown.JobSetLabelName]; set != "" {
		return jobSetGang(pod, set, jobs)
	}
	if name := pod.Labels[wellknown.PodGroupLabel]; name != "" {
		return podGroupGang(pod, name, groups)
	}
	return gang{}, "", nil
}

// annotatedGang reads a pod's gang from sunk's annotations: both, a size from 1 to 10,000 and
// a name that is not empty.
func annotatedGang(pod *v1.Pod) (gang, gangSource, error) {
	a := pod.Annotations
	name, hasGang := a[wellknown.AnnotationGang]
	sizeStr, hasSize := a[wellknown.AnnotationGangSize]
	switch {
	case hasGang && !hasSize:
		return gang{Name: name}, gangFromAnnotation, &annotationError{wellknown.AnnotationGangSize, "", "required with " + wellknown.AnnotationGang}
	case hasSize && !hasGang:
		return gang{}, "", &annotationError{wellknown.AnnotationGang, "", "required with " + wellknown.AnnotationGangSize}
	}
	n, err := strconv.Atoi(sizeStr)
	if err != nil || n < 1 || n > maxGangSize {
		return gang{Name: name}, gangFromAnnotation, &annotationError{wellknown.AnnotationGangSize, sizeStr, fmt.Sprintf("want an integer from 1 to %d", maxGangSize)}
	}
	if name == "" {
		return gang{}, "", &annotationError{wellknown.AnnotationGang, name, "must not be empty"}
	}
	return gang{Name: name, Size: n}, gangFromAnnotation, nil
}

// inGang: pod m names the gang g read from source from (whatever the size it says).
func (p *Plugin) inGang(m *v1.Pod, g gang, from gangSource) bool {
	mg, mfrom, _ := p.gangOf(m)
	return g.Name != "" && mg.Name == g.Name && mfrom == from
}

// gangMembers are the pods of the pod's gang its job is for, by name: all of them (gangPods),
// or for a PodGroup with more pods than its minMember, the minMember chosen (chooseMembers).
func (p *Plugin) gangMembers(pod *v1.Pod, g gang, from gangSource) []*v1.Pod {
	all := p.gangPods(pod, g, from)
	if from == gangFromPodGroup {
		return chooseMembers(all, g.Size, p.holding(all))
	}
	return all
}

// gangPods are the pods of the pod's gang (same namespace and gang, this scheduler, not
// finished or being deleted), by name.
func (p *Plugin) gangPods(pod *v1.Pod, g gang, from gangSource) []*v1.Pod {
	all, _ := p.pods.Pods(pod.Namespace).List(labels.Everything())
	var out []*v1.Pod
	for _, m := range all {
		if m.Spec.SchedulerName == pod.Spec.SchedulerName && p.inGang(m, g, from) && alive(m) {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// gangGroups files every gang of pods under its job-book key (members alive, by name, as
// gangMembers lists them).
func (p *Plugin) gangGroups(pods []*v1.Pod) map[string][]*v1.Pod {
	type id struct {
		ns, name string
		from     gangSource
	}
	byGang := map[id][]*v1.Pod{}
	size := map[id]int{} // a PodGroup's minMember, read from one object for all its pods
	for _, pod := range pods {
		if g, from, _ := p.gangOf(pod); g.Name != "" && alive(pod) {
			k := id{pod.Namespace, g.Name, from}
			byGang[k] = append(byGang[k], pod)
			size[k] = max(size[k], g.Size)
		}
	}
	out := make(map[string][]*v1.Pod, len(byGang))
	for g, members := range byGang {
		sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
		if g.from == gangFromPodGroup {
			members = chooseMembers(members, size[g], p.holding(members))
		}
		out[gangJobKey(g.ns, g.name, members)] = members
	}
	return out
}
