package plugin

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
	if got := commentKeys(jobComment(podJobKey("a"))); !slices.Equal(got, []string{"pod:a"}) {
		t.Fatalf("pod comment %q: keys %v", jobComment(podJobKey("a")), got)
	}
	gk := gangJobKey("ns", "g", nil)
	if got := commentKeys(jobComment(gk)); !slices.Equal(got, []string{gk}) || !strings.HasPrefix(jobComment(gk), "sunk-gang:") {
		t.Fatalf("gang comment %q: keys %v", jobComment(gk), got)
	}
	// The first format named every member: still read, one key per pod.
	if got := commentKeys("sunk-pod:a,b"); !slices.Equal(got, []string{"pod:a", "pod:b"}) {
		t.Fatalf("first-format gang comment: keys %v", got)
	}
	for _, c := range []string{"someone else's", "sunk-pod:", "sunk-gang:", "sunk-gang:a,b"} {
		if got := commentKeys(c); got != nil {
			t.Errorf("comment %q named %v", c, got)
		}
	}
}

// A gang's key depends on its namespace, name and exact members, in order.
func TestGangKey(t *testing.T) {
	members := func(uids ...string) []*v1.Pod {
		var out []*v1.Pod
		for _, u := range uids {
			out = append(out, &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(u)}})
		}
		return out
	}
	base := gangJobKey("ns", "g", members("a", "b"))
	for name, other := range map[string]string{
		"another namespace": gangJobKey("ns2", "g", members("a", "b")),
		"another gang":      gangJobKey("ns", "g2", members("a", "b")),
		"a member less":     gangJobKey("ns", "g", members("a")),
		"another member":    gangJobKey("ns", "g", members("a", "c")),
		"another order":     gangJobKey("ns", "g", members("b", "a")),
		"name/uid boundary": gangJobKey("ns", "g\x00a", members("b")),
	} {
		if other == base {
			t.Errorf("%s: same key %s", name, base)
		}
	}
	if again := gangJobKey("ns", "g", members("a", "b")); again != base {
		t.Errorf("key not stable: %s, then %s", base, again)
	}
}
