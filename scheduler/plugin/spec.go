package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// ResourceGPU is the extended resource that becomes GRES gpu.
const ResourceGPU v1.ResourceName = wellknown.ResourceGPU

// A placeholder job's comment names what it holds, in a size that does not grow with the gang:
//
//	sunk-pod:<uid>        the job of one pod
//	sunk-gang:<gang key>  the job of a gang (gangKey: a hash of its namespace, name and members)
//
// It is how a restarted scheduler finds its jobs and their pods: a gang's members are found again
// in the pod cache by their gang (gangOf: sunk.dev/gang, or their workload's labels). The
// comment is followed by a mark that says the scheduler wrote it (trust.go). Slurm caps a
// comment at 1,024 bytes;
// the first format listed all members' UIDs (sunk-pod:<uid>,<uid>,…) and refused gangs of more
// than 27. Such comments are still parsed, but carry no mark: those jobs are no longer trusted.
const (
	podPrefix  = "sunk-pod:"
	gangPrefix = "sunk-gang:"
)

// Keys file a job in the job book: "pod:<uid>" or "gang:<gang key>".
const (
	podKey  = "pod:"
	gangKey = "gang:"
)

// podJobKey and gangJobKey are the job-book keys of a pod's and of a gang's job.
func podJobKey(uid types.UID) string { return podKey + string(uid) }

func gangJobKey(namespace, name string, members []*v1.Pod) string {
	h := sha256.New()
	// Each part length-prefixed: no name or UID can run into the next.
	fmt.Fprintf(h, "%d:%s%d:%s", len(namespace), namespace, len(name), name)
	for _, m := range members {
		fmt.Fprintf(h, "%d:%s", len(m.UID), m.UID)
	}
	return gangKey + hex.EncodeToString(h.Sum(nil)[:16])
}

// jobComment is the body of the comment of the job filed under key (marker.comment marks it).
func jobComment(key string) string {
	if rest, ok := strings.CutPrefix(key, gangKey); ok {
		return gangPrefix + rest
	}
	return podPrefix + strings.TrimPrefix(key, podKey)
}

// commentKeys returns the keys of the job a comment's body names: one, or one per pod for a gang
// job of the first format; nil for a job that is not a placeholder. It does not say whose job it
// is: see placeholderKeys.
func commentKeys(comment string) []string {
	if rest, ok := strings.CutPrefix(comment, gangPrefix); ok && rest != "" && !strings.ContainsAny(rest, ", ") {
		return []string{gangKey + rest}
	}
	rest, ok := strings.CutPrefix(comment, podPrefix)
	if !ok || rest == "" {
		return nil
	}
	var keys []string
	for _, uid := range strings.Split(rest, ",") {
		keys = append(keys, podKey+uid)
	}
	return keys
}

// podSpec is what a pod asks of Slurm, parsed from its requests and annotations.
type podSpec struct {
	Job      slurm.JobSubmit // per node; MinNodes/MaxNodes/Tasks set for the gang size
	Gang     gang
	GangFrom gangSource
	// Pack is how many members of a packed gang one Slurm task holds (packGang); 0: one member
	// per node (a single pod, or a gang whose members each take a node).
	Pack int
}

// annotationError names the annotation that is wrong, for the pod's condition and event.
type annotationError struct {
	Key, Value, Why string
}

func (e *annotationError) Error() string {
	return fmt.Sprintf("annotation %s=%q: %s", e.Key, e.Value, e.Why)
}

// specOf is what the pod asks of Slurm: its job (specFor), for the gang gangOf reads.
func (p *Plugin) specOf(pod *v1.Pod) (*podSpec, error) {
	g, from, err := p.gangOf(pod)
	return specFor(pod, g, from, err)
}

// specFor turns a pod into the job that holds its resources, for gang g (the zero gang: the
// pod alone); gangErr, the gang reader's error, is reported after the pod's other annotations'.
// CPUs are the pod's CPU request rounded up to whole CPUs (at least one), memory
// its memory request in MiB rounded up, nvidia.com/gpu its GRES (podGres); init containers
// count as Kubernetes counts them.
func specFor(pod *v1.Pod, g gang, from gangSource, gangErr error) (*podSpec, error) {
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
	gres, err := podGres(pod)
	if err != nil {
		return nil, err
	}
	s.Job.GRES = gres
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
	if gangErr != nil {
		return nil, gangErr
	}
	if g.Size > 0 {
		n := g.Size
		s.Gang, s.GangFrom = g, from
		s.Job.Name = truncate("sunk-gang-"+pod.Namespace+"-"+g.Name, 200)
		if s.Job.Exclusive || s.Job.GRES != "" {
			// A node each: exclusive members ask for whole nodes, and GRES is per node.
			s.Job.Tasks, s.Job.MinNodes, s.Job.MaxNodes = n, n, n
		} else {
			packGang(s, n, req.Cpu().MilliValue(), req.Memory().Value())
		}
	}
	return s, nil
}

// packGang makes the job of a gang of n members that share nodes (not exclusive, no GPUs): Slurm
// places tasks of whole CPUs wherever they fit, several to a node, and each task holds as many
// members as its CPUs cover (members of 10m CPU: 100 to a task of one CPU). Memory is asked per
// CPU, as the members' memory per task spread over the task's CPUs, since how many tasks share
// a node is Slurm's choice. Which members go where follows from the CPUs the job holds on each
// node (packedNode). A member without a CPU request counts as one CPU, as a single pod does.
func packGang(s *podSpec, n int, milliCPU, memBytes int64) {
	cpus := int64(s.Job.CPUsPerTask)
	if milliCPU <= 0 {
		milliCPU = 1000
	}
	k := max(int(cpus*1000/milliCPU), 1)
	k = min(k, n)
	s.Pack = k
	s.Job.Tasks = (n + k - 1) / k
	s.Job.MinNodes, s.Job.MaxNodes = 1, 0
	s.Job.MemoryPerNodeMB = 0
	if memBytes > 0 {
		perTask := int64(k) * memBytes
		s.Job.MemoryPerCPUMB = (perTask + cpus<<20 - 1) / (cpus << 20)
	}
}

// packedNode is the Slurm node of member i (from 0) of a packed gang's running job: members
// fill the job's nodes in the order of its allocation, each node as many as the tasks its CPUs
// hold (cpusPerTask each) times pack. An exclusive job holds whole nodes, which may hold more
// than Slurm laid there; the nodes are then filled in order, on CPUs the job holds all the same.
func packedNode(alloc []slurm.NodeAllocation, i, pack, cpusPerTask int) (string, error) {
	if len(alloc) == 0 {
		return "", fmt.Errorf("the job reports no CPUs per node (job_resources)")
	}
	rest := i
	for _, a := range alloc {
		room := a.CPUs / max(cpusPerTask, 1) * pack
		if rest < room {
			return a.Node, nil
		}
		rest -= room
	}
	return "", fmt.Errorf("member %d does not fit the job's allocation %v (%d members per task of %d CPUs)", i, alloc, pack, cpusPerTask)
}

// badSpec reports a malformed annotation or GPU quantity once per pod and message (the
// scheduler repeats it in the pod's PodScheduled condition on every attempt).
func (l *lifecycle) badSpec(p *Plugin, pod *v1.Pod, err error) {
	l.mu.Lock()
	repeat := l.badSpecs[pod.UID] == err.Error()
	l.badSpecs[pod.UID] = err.Error()
	l.mu.Unlock()
	if repeat {
		return
	}
	reason := sunkv1.ReasonInvalidAnnotation
	if re := (*resourceError)(nil); errors.As(err, &re) {
		reason = sunkv1.ReasonInvalidResources
	}
	l.event(p, pod, v1.EventTypeWarning, reason, "%v", err)
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
