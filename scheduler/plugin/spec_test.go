package plugin

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

func pod(ann map[string]string, req v1.ResourceList) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", Annotations: ann},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req}}}}}
}

func TestParsePod(t *testing.T) {
	s, err := parsePod(pod(map[string]string{
		wellknown.AnnotationPartition: "gpu", wellknown.AnnotationAccount: "ml", wellknown.AnnotationQOS: "high", wellknown.AnnotationPriority: "100",
		wellknown.AnnotationTimeLimit: "90m", wellknown.AnnotationReservation: "maint", wellknown.AnnotationExclusive: "false", wellknown.AnnotationConstraint: "a100",
	}, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("1G"), ResourceGPU: resource.MustParse("2")}))
	if err != nil {
		t.Fatal(err)
	}
	j := s.Job
	if j.Partition != "gpu" || j.Account != "ml" || j.QOS != "high" || *j.Priority != 100 || j.TimeLimit != 90*time.Minute ||
		j.Reservation != "maint" || j.Exclusive || j.Constraints != "a100" || j.CPUsPerTask != 2 || j.MemoryPerNodeMB != 954 ||
		j.GRES != "gres/gpu:2" || j.MinNodes != 1 || s.Gang.Size != 0 || !strings.HasPrefix(j.Script, "#!") {
		t.Fatalf("job %+v", j)
	}

	s, err = parsePod(pod(map[string]string{wellknown.AnnotationGang: "g", wellknown.AnnotationGangSize: "3", wellknown.AnnotationTimeLimit: "30"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Job.MinNodes != 3 || s.Job.MaxNodes != 3 || s.Job.Tasks != 3 || s.Gang != (gang{"g", 3}) || !s.Job.Exclusive ||
		s.Job.CPUsPerTask != 1 || s.Job.TimeLimit != 30*time.Minute {
		t.Fatalf("gang job %+v %+v", s.Job, s.Gang)
	}
}

func TestParsePodNamesTheBadAnnotation(t *testing.T) {
	for key, ann := range map[string]map[string]string{
		wellknown.AnnotationPriority:  {wellknown.AnnotationPriority: "-1"},
		wellknown.AnnotationTimeLimit: {wellknown.AnnotationTimeLimit: "soon"},
		wellknown.AnnotationExclusive: {wellknown.AnnotationExclusive: "maybe"},
		wellknown.AnnotationGangSize:  {wellknown.AnnotationGang: "g"},
		wellknown.AnnotationGang:      {wellknown.AnnotationGangSize: "2"},
	} {
		_, err := parsePod(pod(ann, nil))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%v: error %v, want one naming %s", ann, err, key)
		}
	}
	if _, err := parsePod(pod(map[string]string{wellknown.AnnotationGang: "g", wellknown.AnnotationGangSize: "0"}, nil)); err == nil {
		t.Error("gang size 0 accepted")
	}
}

func TestCommentRoundTrip(t *testing.T) {
	j := &slurm.Job{Comment: jobComment([]string{"a", "b"})}
	if got := podUIDsOf(j); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("podUIDsOf = %v", got)
	}
	if podUIDsOf(&slurm.Job{Comment: "someone else's"}) != nil {
		t.Fatal("a foreign comment named pods")
	}
	p := &Plugin{args: Args{SlurmUser: "slurm"}}
	if got := p.placeholderPods(&slurm.Job{UserName: "slurm", Comment: jobComment([]string{"a"})}); len(got) != 1 {
		t.Fatalf("the scheduler's own job: %v", got)
	}
	if got := p.placeholderPods(&slurm.Job{UserName: "mallory", Comment: jobComment([]string{"a"})}); got != nil {
		t.Fatalf("a job of another user with a copied comment named pods: %v", got)
	}
	j = &slurm.Job{Comment: jobComment([]string{"u0", "u1"}), Nodes: "n[1-2]"}
	for i, want := range []string{"n1", "n2"} {
		p := pod(nil, nil)
		p.UID = types.UID([]string{"u0", "u1"}[i])
		if got, err := slurmNodeFor(p, j); err != nil || got != want {
			t.Errorf("member %d: %q %v, want %s", i, got, err, want)
		}
	}
}
