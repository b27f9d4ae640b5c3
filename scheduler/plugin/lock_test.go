package plugin

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
)

// conflicts makes the next n node updates fail with a conflict, as when the kubelet or another
// writer changed the node between the plugin's read and its write.
func conflicts(b *testBed, n int) {
	var mu sync.Mutex
	b.h.cs.(*fake.Clientset).PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if n == 0 {
			return false, nil, nil
		}
		n--
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "k1", nil)
	})
}

func fastBackoff(t *testing.T) {
	saved := lockBackoff
	lockBackoff = wait.Backoff{Steps: saved.Steps, Duration: time.Millisecond, Factor: 1}
	t.Cleanup(func() { lockBackoff = saved })
}

func taintsOf(b *testBed, node string) []v1.Taint {
	b.t.Helper()
	n, err := b.h.cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	return n.Spec.Taints
}

// The node lock outlasts a run of conflicting writes (the client's default retry gave up after
// five within 50 ms, and the member whose lock failed stayed unbound while its gang ran).
func TestLockNodeOutlastsConflicts(t *testing.T) {
	fastBackoff(t)
	b := newTestBed(t, 1, nil, nil)
	conflicts(b, 8)
	if err := b.p.lockNode(context.Background(), "k1", "7"); err != nil {
		t.Fatalf("lockNode after 8 conflicts: %v", err)
	}
	if got := taintsOf(b, "k1"); !slices.Equal(got, []v1.Taint{lockTaint("7")}) {
		t.Fatalf("taints %v", got)
	}
}

// Members of one gang on one node lock it once, whatever the order of their PreBinds.
func TestGangLocksNodeOnce(t *testing.T) {
	b := newTestBed(t, 1, nil, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- b.p.lockNode(context.Background(), "k1", "7")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := taintsOf(b, "k1"); !slices.Equal(got, []v1.Taint{lockTaint("7")}) {
		t.Fatalf("taints %v", got)
	}
}

// The scenario of a gang of 20 on one node: a member's PreBind fails, another member's locks the
// node. The first one's next attempt must pass kube-scheduler's own taint filter; a pod of
// another job must not.
func TestOwnLockDoesNotKeepMemberOut(t *testing.T) {
	fastBackoff(t)
	ctx := context.Background()
	b := newTestBed(t, 1, nil, nil)
	members := b.gang("g", 2)
	other := b.addPod(pod(nil, nil))
	c := func() *framework.CycleState {
		state := framework.NewCycleState()
		state.Write(stateKey, &cycle{spec: &podSpec{Job: slurm.JobSubmit{Exclusive: true}}, job: &slurm.Job{ID: 7}})
		return state
	}
	conflicts(b, lockBackoff.Steps)
	if st := b.p.PreBind(ctx, c(), members[1], "k1"); st.IsSuccess() {
		t.Fatal("a member's PreBind succeeded against a node whose every write conflicted")
	}
	if st := b.p.PreBind(ctx, c(), members[0], "k1"); !st.IsSuccess() {
		t.Fatalf("the other member's PreBind: %v", st)
	}

	n, err := b.h.cs.CoreV1().Nodes().Get(ctx, "k1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(n)
	tt, err := tainttoleration.New(ctx, nil, b.h, feature.Features{})
	if err != nil {
		t.Fatal(err)
	}
	filter := tt.(framework.FilterPlugin)
	again, err := b.h.cs.CoreV1().Pods("ns").Get(ctx, members[1].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := filter.Filter(ctx, framework.NewCycleState(), again, ni); !st.IsSuccess() {
		t.Errorf("the member whose PreBind failed is kept off its own job's node: %v", st)
	}
	if again.Annotations[wellknown.AnnotationJob] != "7" {
		t.Errorf("member annotations %v", again.Annotations)
	}
	if st := filter.Filter(ctx, framework.NewCycleState(), other, ni); st.IsSuccess() {
		t.Error("a pod of no job passed the lock")
	}
}

// A member left without the toleration (its PreBind failed before writing it) gets it from the
// lifecycle loop once its job's lock is on a node.
func TestLoopGivesOwnLockToleration(t *testing.T) {
	fk := slurmfake.New()
	b := newTestBed(t, 2, nil, fk)
	members := b.gang("g", 2)
	key := gangJobKey("ns", "g", members)
	fk.AddJob(slurm.Job{ID: 7, UserName: "root", Comment: testMarker.comment(key), State: []string{"RUNNING"}, Nodes: "n[1-2]"})
	b.poll(b.p)
	n, _ := b.h.cs.CoreV1().Nodes().Get(context.Background(), "k1", metav1.GetOptions{})
	n.Spec.Taints = []v1.Taint{lockTaint("7")}
	if err := b.h.inf.Core().V1().Nodes().Informer().GetIndexer().Update(n); err != nil {
		t.Fatal(err)
	}
	if err := b.p.reconcile(context.Background(), klog.Background()); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		got, err := b.h.cs.CoreV1().Pods("ns").Get(context.Background(), m.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(got.Spec.Tolerations, ownLockToleration("7")) {
			t.Errorf("%s tolerations %v", m.Name, got.Spec.Tolerations)
		}
	}
}
