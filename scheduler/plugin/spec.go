package plugin

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// ResourceGPU is the extended resource that becomes GRES gpu.
const ResourceGPU v1.ResourceName = "nvidia.com/gpu"

// commentPrefix starts the comment of every placeholder job; the pod UIDs follow, comma
// separated. It is how a restarted scheduler finds its jobs and their pods.
const commentPrefix = "sunk-pod:"

// jobComment is the comment of the job of the pods with these UIDs.
func jobComment(uids []string) string { return commentPrefix + strings.Join(uids, ",") }

// placeholderPods returns the pod UIDs of one of this scheduler's placeholder jobs, nil for
// any other job. A comment is no proof: any Slurm user can copy one (squeue -o %k) onto a job
// of their own, and the scheduler would then evict the victim pod and cancel its job. Only
// jobs owned by the user the scheduler submits as count, which no ordinary user can be.
func (p *Plugin) placeholderPods(j *slurm.Job) []string {
	if j.UserName != p.args.SlurmUser {
		return nil
	}
	return podUIDsOf(j)
}

// podUIDsOf returns the pod UIDs a job's comment names; nil for a job that is not a
// placeholder. It does not say whose job it is: see placeholderPods.
func podUIDsOf(j *slurm.Job) []string {
	rest, ok := strings.CutPrefix(j.Comment, commentPrefix)
	if !ok || rest == "" {
		return nil
	}
	return strings.Split(rest, ",")
}

// gang is a pod's group; the zero value means "no gang".
type gang struct {
	Name string
	Size int
}

// podSpec is what a pod asks of Slurm, parsed from its requests and annotations.
type podSpec struct {
	Job  slurm.JobSubmit // per node; MinNodes/MaxNodes/Tasks set for the gang size
	Gang gang
}

// annotationError names the annotation that is wrong, for the pod's condition and event.
type annotationError struct {
	Key, Value, Why string
}

func (e *annotationError) Error() string {
	return fmt.Sprintf("annotation %s=%q: %s", e.Key, e.Value, e.Why)
}

// parsePod turns a pod into the job that holds its resources. CPUs are the pod's CPU request
// rounded up to whole CPUs (at least one), memory its memory request in MiB rounded up,
// nvidia.com/gpu its GRES; init containers count as Kubernetes counts them.
func parsePod(pod *v1.Pod) (*podSpec, error) {
	a := pod.Annotations
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	cpus := max(int((req.Cpu().MilliValue()+999)/1000), 1)
	memMB := (req.Memory().Value() + (1<<20 - 1)) >> 20
	s := &podSpec{Job: slurm.JobSubmit{
		Name:        truncate("sunk-"+pod.Namespace+"-"+pod.Name, 200),
		Script:      "#!/bin/sh\n# sunk-scheduler placeholder: holds the allocation while the pod runs\nexec sleep infinity\n",
		Partition:   a[wellknown.AnnotationPartition],
		Account:     a[wellknown.AnnotationAccount],
		QOS:         a[wellknown.AnnotationQOS],
		Reservation: a[wellknown.AnnotationReservation],
		Constraints: a[wellknown.AnnotationConstraint],
		Tasks:       1, CPUsPerTask: cpus, MinNodes: 1, MaxNodes: 1,
		MemoryPerNodeMB: memMB,
		Exclusive:       true,
		StdOut:          "/dev/null", StdErr: "/dev/null",
	}}
	if g, ok := req[ResourceGPU]; ok && g.Value() > 0 {
		s.Job.GRES = fmt.Sprintf("gres/gpu:%d", g.Value())
	}
	if v, ok := a[wellknown.AnnotationPriority]; ok {
		p, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return nil, &annotationError{wellknown.AnnotationPriority, v, "want an unsigned integer"}
		}
		p32 := uint32(p)
		s.Job.Priority = &p32
	}
	if v, ok := a[wellknown.AnnotationTimeLimit]; ok {
		d, err := parseTimeLimit(v)
		if err != nil {
			return nil, &annotationError{wellknown.AnnotationTimeLimit, v, err.Error()}
		}
		s.Job.TimeLimit = d
	}
	if v, ok := a[wellknown.AnnotationExclusive]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, &annotationError{wellknown.AnnotationExclusive, v, "want true or false"}
		}
		s.Job.Exclusive = b
	}
	name, hasGang := a[wellknown.AnnotationGang]
	sizeStr, hasSize := a[wellknown.AnnotationGangSize]
	switch {
	case hasGang && !hasSize:
		return nil, &annotationError{wellknown.AnnotationGangSize, "", "required with " + wellknown.AnnotationGang}
	case hasSize && !hasGang:
		return nil, &annotationError{wellknown.AnnotationGang, "", "required with " + wellknown.AnnotationGangSize}
	case hasGang:
		n, err := strconv.Atoi(sizeStr)
		if err != nil || n < 1 || n > 10000 {
			return nil, &annotationError{wellknown.AnnotationGangSize, sizeStr, "want an integer from 1 to 10000"}
		}
		if name == "" {
			return nil, &annotationError{wellknown.AnnotationGang, name, "must not be empty"}
		}
		s.Gang = gang{Name: name, Size: n}
		s.Job.Tasks, s.Job.MinNodes, s.Job.MaxNodes = n, n, n
		s.Job.Name = truncate("sunk-gang-"+pod.Namespace+"-"+name, 200)
	}
	return s, nil
}

func parseTimeLimit(v string) (time.Duration, error) {
	if m, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(m) * time.Minute, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want minutes or a positive duration such as 90m")
	}
	return d, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
