package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/wait"
)

// podGroup is PodGroup ns/name as the API serves it (unstructured); minMember nil: no field.
func podGroup(name string, minMember any) *unstructured.Unstructured {
	spec := map[string]any{}
	if minMember != nil {
		spec["minMember"] = minMember
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": wellknown.PodGroupGroup + "/" + wellknown.PodGroupVersion, "kind": "PodGroup",
		"metadata": map[string]any{"name": name, "namespace": "ns", "uid": "pg-" + name},
		"spec":     spec,
	}}
}

// servedPodGroups is a cache that serves PodGroups (synced), holding objs; add puts more in it.
func servedPodGroups(t *testing.T, objs ...*unstructured.Unstructured) (groups *podGroupCache, add func(*unstructured.Unstructured)) {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	add = func(o *unstructured.Unstructured) {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		add(o)
	}
	groups = &podGroupCache{}
	groups.serve(cache.NewGenericLister(idx, podGroupGVR.GroupResource()), func() bool { return true })
	return groups, add
}

// pgPod is a pod of PodGroup group, as its author labels it.
func pgPod(name, group string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
		Labels: map[string]string{wellknown.PodGroupLabel: group}, Annotations: map[string]string{}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
}

// withLabel adds the PodGroup label to a pod of another workload.
func withLabel(pod *v1.Pod, group string) *v1.Pod {
	pod.Labels[wellknown.PodGroupLabel] = group
	return pod
}

// TestReadPodGroupGang: the gang of a pod labelled for a PodGroup is the PodGroup's minMember;
// sunk's annotations and the LeaderWorkerSet and JobSet labels come first.
func TestReadPodGroupGang(t *testing.T) {
	groups, _ := servedPodGroups(t, podGroup("train", int64(3)), podGroup("solo", int64(1)), podGroup("nomin", nil),
		podGroup("zero", int64(0)), podGroup("huge", int64(maxGangSize+1)), podGroup("text", "3"), podGroup("half", 2.5))
	jobs := jobSetJob("train", "workers", 0, ptr.To[int32](4), ptr.To[int32](4))
	jobLister := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Batch().V1().Jobs()
	if err := jobLister.Informer().GetIndexer().Add(jobs); err != nil {
		t.Fatal(err)
	}
	other := pgPod("x", "train")
	other.Namespace = "other"
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		groups  *podGroupCache
		want    gang
		from    gangSource
		err     string // in the error; "" none
		waiting bool
	}{
		{"PodGroup of minMember 3", pgPod("a", "train"), groups, gang{"podgroup/train", 3}, gangFromPodGroup, "", false},
		{"PodGroup of minMember 1: a plain pod", pgPod("a", "solo"), groups, gang{}, "", "", false},
		{"PodGroup not cached (yet)", pgPod("a", "late"), groups, gang{Name: "podgroup/late"}, gangFromPodGroup, "waiting for PodGroup ns/late", true},
		{"PodGroup of another namespace", other, groups, gang{Name: "podgroup/train"}, gangFromPodGroup, "waiting for PodGroup other/train", true},
		{"minMember missing", pgPod("a", "nomin"), groups, gang{Name: "podgroup/nomin"}, gangFromPodGroup, "PodGroup ns/nomin spec.minMember=(missing): want an integer from 1 to 10000", false},
		{"minMember 0", pgPod("a", "zero"), groups, gang{Name: "podgroup/zero"}, gangFromPodGroup, "spec.minMember=0:", false},
		{"minMember above the largest gang", pgPod("a", "huge"), groups, gang{Name: "podgroup/huge"}, gangFromPodGroup, "spec.minMember=10001:", false},
		{"minMember a string", pgPod("a", "text"), groups, gang{Name: "podgroup/text"}, gangFromPodGroup, "spec.minMember=3:", false},
		{"minMember with a fraction", pgPod("a", "half"), groups, gang{Name: "podgroup/half"}, gangFromPodGroup, "spec.minMember=2.5:", false},
		{"the API's answer not in yet", pgPod("a", "train"), &podGroupCache{}, gang{Name: "podgroup/train"}, gangFromPodGroup, "waiting to learn whether the API serves podgroups.scheduling.x-k8s.io", true},
		{"no PodGroups served: the label means nothing", pgPod("a", "train"), nil, gang{}, "", "", false},
		{"an empty label means nothing", pgPod("a", ""), groups, gang{}, "", "", false},

		{"sunk's annotations win", with(pgPod("a", "train"), wellknown.AnnotationGang, "mine", wellknown.AnnotationGangSize, "2"), groups,
			gang{"mine", 2}, gangFromAnnotation, "", false},
		{"a sunk annotation alone is an error", with(pgPod("a", "train"), wellknown.AnnotationGangSize, "2"), groups, gang{}, "", "sunk.dev/gang", false},
		{"a LeaderWorkerSet group comes first", withLabel(lwsPod("web", 0, 1, 2), "train"), groups, gang{"leaderworkerset/web/0", 2}, gangFromLeaderWorkerSet, "", false},
		{"a JobSet's Job comes first", withLabel(jobSetPod(jobs, 0), "train"), groups, gang{"jobset/train/workers", 4}, gangFromJobSet, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, from, err := readGang(tc.pod, jobLister.Lister(), tc.groups)
			if g != tc.want || from != tc.from {
				t.Errorf("gang %+v from %q, want %+v from %q", g, from, tc.want, tc.from)
			}
			if (err != nil) != (tc.err != "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error %v, want one with %q", err, tc.err)
			}
			var we *workloadError
			if waiting := errors.As(err, &we) && we.Waiting; waiting != tc.waiting {
				t.Errorf("waiting %v, want %v (%v)", waiting, tc.waiting, err)
			}
		})
	}
}

// TestChooseMembers: a PodGroup's job is for minMember of its pods: those held by a job first,
// then by name; in name order.
func TestChooseMembers(t *testing.T) {
	pods := func(names ...string) []*v1.Pod {
		var out []*v1.Pod
		for _, n := range names {
			out = append(out, pgPod(n, "g"))
		}
		return out
	}
	names := func(ps []*v1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		all  []string
		size int
		held []string
		want []string
	}{
		{"fewer pods than minMember: all", []string{"a", "b"}, 3, nil, []string{"a", "b"}},
		{"as many: all", []string{"a", "b", "c"}, 3, nil, []string{"a", "b", "c"}},
		{"more: the first by name", []string{"a", "b", "c", "d"}, 3, nil, []string{"a", "b", "c"}},
		{"a held pod before a smaller name", []string{"a", "b", "c", "d"}, 3, []string{"d"}, []string{"a", "b", "d"}},
		{"all held ones, whatever their names", []string{"0", "b", "c", "d"}, 3, []string{"b", "c", "d"}, []string{"b", "c", "d"}},
		{"more held than minMember: the first held by name", []string{"a", "b", "c", "d"}, 2, []string{"b", "c", "d"}, []string{"b", "c"}},
		{"no size (the PodGroup unread): all", []string{"a", "b", "c", "d"}, 0, nil, []string{"a", "b", "c", "d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := func(p *v1.Pod) bool { return slices.Contains(tc.held, p.Name) }
			if got := names(chooseMembers(pods(tc.all...), tc.size, held)); !slices.Equal(got, tc.want) {
				t.Errorf("chose %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPodGroupBindsMinMember: a PodGroup of minMember 3 with 4 pods is one Slurm job for 3 of
// them (by name); the 4th waits, told why, and keeps waiting when a pod with a smaller name
// comes (the job's members are held). A restarted scheduler finds the job's members again; a
// member deleted cancels the job and lets the waiting pods in.
func TestPodGroupBindsMinMember(t *testing.T) {
	fk := slurmfake.New()
	hc := newHookClient(t, fk, false)
	b := newTestBed(t, 3, hc, fk)
	groups, _ := servedPodGroups(t, podGroup("train", int64(3)))
	b.p.podGroups = groups
	var pods []*v1.Pod
	for _, n := range []string{"pg-a", "pg-b"} {
		pods = append(pods, b.addPod(pgPod(n, "train")))
	}
	if st := reserveGang(t, b, pods[0]); st.Code() != framework.Unschedulable || st.Message() != "gang podgroup/train has 2 of 3 pods" {
		t.Fatalf("Reserve with 2 of 3: %v", st)
	}
	for _, n := range []string{"pg-c", "pg-d"} {
		pods = append(pods, b.addPod(pgPod(n, "train")))
	}
	beyond := "gang podgroup/train has 4 pods for minMember 3: its Slurm job is for 3 of them"
	if _, st, _ := b.cycle(b.p, pods[3]); st.Code() != framework.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), beyond) {
		t.Fatalf("PreFilter of the 4th pod: %v, want %q", st, beyond)
	}
	if st := reserveGang(t, b, pods[1]); st.Code() != framework.Unschedulable || st.Message() != "submitting the Slurm job" {
		t.Fatalf("Reserve with 3 of 3: %v, want a submission", st)
	}
	id := receive(t, hc.submitted, "the PodGroup's submission")
	waitFiled(t, b.p, id)
	b.p.mu.Lock()
	members := b.p.gangs[id]
	b.p.mu.Unlock()
	if want := uidsOf(pods[:3]); !slices.Equal(members, want) {
		t.Fatalf("job %d is for %v, want %v", id, members, want)
	}
	j, err := fk.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Name != "sunk-gang-ns-podgroup/train" || j.NodeCount != 3 {
		t.Errorf("job %q on %d nodes, want sunk-gang-ns-podgroup/train on 3", j.Name, j.NodeCount)
	}
	// A pod whose name comes first does not take the place of one the job is for.
	early := b.addPod(pgPod("pg-0", "train"))
	if _, st, _ := b.cycle(b.p, early); !strings.Contains(st.Message(), "gang podgroup/train has 5 pods for minMember 3") {
		t.Fatalf("PreFilter of a later pod with a smaller name: %v", st)
	}
	b.poll(b.p)
	for i, m := range append([]*v1.Pod{early}, pods...) {
		got, ok := b.p.jobOf(m)
		if inJob := i >= 1 && i <= 3; ok != inJob || (ok && got.ID != id) {
			t.Errorf("%s: job %v (%v), want it in job %d: %v", m.Name, got, ok, id, inJob)
		}
	}

	// Slurm runs it on n1-n3; a new scheduler knows nothing but Slurm and the pod cache. (Had
	// pg-0 stayed, it would choose pg-0, pg-a and pg-b, match the job to nothing and cancel it,
	// as for a gang whose members changed while no scheduler ran: docs/scheduler.md.)
	j.State, j.Nodes = []string{"RUNNING"}, "n[1-3]"
	fk.AddJob(*j)
	b.deletePod(early)
	p2 := b.newPlugin(hc, b.p.args)
	p2.podGroups = groups
	// The loop's first pass matches the job to the gang in the pod cache (gangGroups).
	if err := p2.reconcile(context.Background(), klog.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fk.Calls("CancelJobs"); got != 0 {
		t.Fatalf("the adopted PodGroup's job was signalled %d times", got)
	}
	for i, m := range pods[:3] {
		_, st, passed := b.cycle(p2, m)
		if want := fmt.Sprintf("k%d", i+1); !st.IsSuccess() || len(passed) != 1 || passed[0] != want {
			t.Errorf("%s after the restart: %v, nodes %v, want %s", m.Name, st, passed, want)
		}
	}
	if _, st, _ := b.cycle(p2, pods[3]); !strings.Contains(st.Message(), beyond) {
		t.Errorf("the 4th pod after the restart: %v", st)
	}

	// A member deleted: the job is cancelled (the whole allocation given back), and the pod
	// that waited beyond minMember is let in.
	b.deletePod(pods[1])
	b.h.mu.Lock()
	b.h.activated = nil
	b.h.mu.Unlock()
	p2.podGroupMemberGone(klog.Background()).OnDelete(pods[1])
	b.h.mu.Lock()
	activated := slices.Clone(b.h.activated)
	b.h.mu.Unlock()
	if want := []string{"ns/pg-a", "ns/pg-c", "ns/pg-d"}; !slices.Equal(slices.Sorted(slices.Values(activated)), want) {
		t.Errorf("activated %v when pg-b went, want %v", activated, want)
	}
	if err := p2.reconcile(context.Background(), klog.Background()); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, hc.cancelled, "cancellation"); got != id {
		t.Fatalf("cancelled job %d, want %d", got, id)
	}
}

// waitFiled waits until the plugin filed the gang job it submitted (right after the hook fires).
func waitFiled(t *testing.T, p *Plugin, id uint32) {
	t.Helper()
	wait.For(t, "the submission filed", 10*time.Second, time.Millisecond, func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if _, ok := p.gangs[id]; !ok {
			return fmt.Errorf("job %d not filed", id)
		}
		return nil
	})
}

// TestPodGroupWaitsForBoundMember: a gang with a member still bound (its job ended, or the
// gang changed) asks for no new job: the bound pod cannot move into it.
func TestPodGroupWaitsForBoundMember(t *testing.T) {
	b := newTestBed(t, 3, nil, nil)
	groups, _ := servedPodGroups(t, podGroup("train", int64(3)))
	b.p.podGroups = groups
	bound := pgPod("pg-a", "train")
	bound.Spec.NodeName = "k1"
	b.addPod(bound)
	b.addPod(pgPod("pg-b", "train"))
	c := b.addPod(pgPod("pg-c", "train"))
	if st := reserveGang(t, b, c); st.Code() != framework.Unschedulable || st.Message() != "gang podgroup/train: member pg-a is still bound to node k1" {
		t.Fatalf("Reserve: %v, want a wait for the bound member", st)
	}
	if got := b.slurm.Calls("SubmitJob"); got != 0 {
		t.Errorf("%d submissions", got)
	}
}

// TestPodGroupPodBeforeItsPodGroup: a pod seen before its PodGroup waits without an error event,
// and is let in again when the PodGroup is cached; a malformed PodGroup is reported as an
// InvalidAnnotation event naming the field.
func TestPodGroupPodBeforeItsPodGroup(t *testing.T) {
	b := newTestBed(t, 3, nil, nil)
	groups, add := servedPodGroups(t)
	b.p.podGroups = groups
	member := b.addPod(pgPod("pg-a", "train"))
	if _, st, _ := b.cycle(b.p, member); st.Code() != framework.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "waiting for PodGroup ns/train") {
		t.Fatalf("PreFilter: %v, want unresolvable, waiting for the PodGroup", st)
	}
	select {
	case e := <-b.h.rec.Events:
		t.Errorf("event %q for a pod waiting for its PodGroup", e)
	default:
	}
	pg := podGroup("train", nil)
	add(pg)
	b.h.activated = nil
	b.p.activatePodGroupPods(klog.Background()).OnAdd(pg, false)
	if want := []string{"ns/" + member.Name}; !slices.Equal(b.h.activated, want) {
		t.Errorf("activated %v, want %v", b.h.activated, want)
	}
	if _, st, _ := b.cycle(b.p, member); !strings.Contains(st.Message(), "spec.minMember=(missing)") {
		t.Fatalf("PreFilter with a PodGroup without minMember: %v", st)
	}
	select {
	case e := <-b.h.rec.Events:
		if !strings.Contains(e, "InvalidAnnotation") || !strings.Contains(e, "PodGroup ns/train spec.minMember") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event for a malformed PodGroup")
	}
	// A status update of the PodGroup lets nobody in; a new minMember does.
	b.h.activated = nil
	status := pg.DeepCopy()
	status.Object["status"] = map[string]any{"phase": "Pending"}
	b.p.activatePodGroupPods(klog.Background()).OnUpdate(pg, status)
	if len(b.h.activated) != 0 {
		t.Errorf("a status update activated %v", b.h.activated)
	}
	fixed := podGroup("train", int64(2))
	b.p.activatePodGroupPods(klog.Background()).OnUpdate(status, fixed)
	if want := []string{"ns/" + member.Name}; !slices.Equal(b.h.activated, want) {
		t.Errorf("activated %v on a new minMember, want %v", b.h.activated, want)
	}
}
