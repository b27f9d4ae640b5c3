package plugin

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
)

// fakeHandle is the part of framework.Handle the plugin uses; any other method panics (the
// embedded interface is nil).
type fakeHandle struct {
	framework.Handle
	cs  kubernetes.Interface
	inf informers.SharedInformerFactory
	rec *events.FakeRecorder

	mu        sync.Mutex
	activated []string
}

func (h *fakeHandle) ClientSet() kubernetes.Interface                        { return h.cs }
func (h *fakeHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.inf }
func (h *fakeHandle) EventRecorder() events.EventRecorder                    { return h.rec }
func (h *fakeHandle) IterateOverWaitingPods(func(framework.WaitingPod))      {}
func (h *fakeHandle) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range pods {
		h.activated = append(h.activated, k)
	}
}

// testBed is a plugin over a fake clientset, informer caches filled by hand and a Slurm client
// (slurmfake unless given), with Slurm nodes n1…nN hosted by Kubernetes nodes k1…kN.
type testBed struct {
	t     *testing.T
	p     *Plugin
	h     *fakeHandle
	slurm *slurmfake.Fake
}

func newTestBed(t *testing.T, nodes int, client slurm.Client, fk *slurmfake.Fake) *testBed {
	t.Helper()
	if fk == nil {
		fk = slurmfake.New()
	}
	if client == nil {
		client = fk
	}
	cs := fake.NewClientset()
	h := &fakeHandle{cs: cs, inf: informers.NewSharedInformerFactory(cs, 0), rec: events.NewFakeRecorder(100000)}
	args := Args{SlurmUser: "root", Cluster: "c1", Namespace: "slurm"} // slurmfake's jobs are root's
	args.PollInterval.Duration, args.GangTimeout.Duration = 1e9, 1e9
	b := &testBed{t: t, h: h, slurm: fk}
	for i := 1; i <= nodes; i++ {
		fk.AddNode(slurm.Node{Name: fmt.Sprintf("n%d", i)})
		b.addNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("k%d", i)}})
		b.addPod(&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Namespace: "slurm", UID: types.UID(fmt.Sprintf("compute-%d", i)),
				Labels: map[string]string{wellknown.LabelCluster: "c1", wellknown.LabelComponent: wellknown.ComponentCompute}},
			Spec: v1.PodSpec{NodeName: fmt.Sprintf("k%d", i)},
		})
	}
	b.p = b.newPlugin(client, args)
	return b
}

// newPlugin is a plugin on the bed's caches and clients without its loop: a restarted
// scheduler, when called again.
func (b *testBed) newPlugin(client slurm.Client, args Args) *Plugin {
	b.t.Helper()
	// A full list at every poll: the tests change fields other than the state too.
	jobs := slurm.NewJobInformer(client, slurm.InformerOptions{Interval: args.PollInterval.Duration, JobFullListEvery: time.Nanosecond})
	nodes := slurm.NewNodeInformer(client, slurm.InformerOptions{Interval: args.PollInterval.Duration})
	p := pluginOn(b.h, args, "sunk-scheduler", client, jobs, nodes, b.h.inf.Core().V1().Pods().Lister(), testMarker, staticPolicy{&testPolicy})
	p.allocationRetry = 0 // a refused allocation asks again at once unless a test sets a wait
	p.shapes.watch(p.nodes)
	p.jobs.AddHandler(slurm.Handler[slurm.Job]{
		OnAdd:    func(j slurm.Job) { p.index(&j, true) },
		OnUpdate: func(_, j slurm.Job) { p.index(&j, true) },
		OnDelete: func(j slurm.Job) { p.index(&j, false) },
	})
	b.poll(p)
	return p
}

// poll lists Slurm's jobs and nodes into the plugin's informers once.
func (b *testBed) poll(p *Plugin) {
	b.t.Helper()
	if _, err := p.jobs.Poll(context.Background()); err != nil {
		b.t.Fatal(err)
	}
	if _, err := p.nodes.Poll(context.Background()); err != nil {
		b.t.Fatal(err)
	}
}

func (b *testBed) addNode(n *v1.Node) {
	b.t.Helper()
	if _, err := b.h.cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		b.t.Fatal(err)
	}
	if err := b.h.inf.Core().V1().Nodes().Informer().GetIndexer().Add(n); err != nil {
		b.t.Fatal(err)
	}
}

// addPod puts a pod in the API and in the scheduler's pod cache.
func (b *testBed) addPod(pod *v1.Pod) *v1.Pod {
	b.t.Helper()
	if pod.Spec.SchedulerName == "" && pod.Labels[wellknown.LabelComponent] == "" {
		pod.Spec.SchedulerName = "sunk-scheduler"
	}
	if _, err := b.h.cs.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		b.t.Fatal(err)
	}
	if err := b.h.inf.Core().V1().Pods().Informer().GetIndexer().Add(pod); err != nil {
		b.t.Fatal(err)
	}
	return pod
}

func (b *testBed) deletePod(pod *v1.Pod) {
	b.t.Helper()
	if err := b.h.inf.Core().V1().Pods().Informer().GetIndexer().Delete(pod); err != nil {
		b.t.Fatal(err)
	}
}

// gang adds n members g-0000… of gang g (namespace ns).
func (b *testBed) gang(name string, n int, opts ...func(*v1.Pod)) []*v1.Pod {
	var out []*v1.Pod
	for i := range n {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%04d", name, i), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%s-%04d", name, i)),
			Annotations: map[string]string{wellknown.AnnotationGang: name, wellknown.AnnotationGangSize: fmt.Sprint(n), wellknown.AnnotationExclusive: "false"},
		}}
		for _, o := range opts {
			o(pod)
		}
		out = append(out, b.addPod(pod))
	}
	return out
}

// cycle runs PreFilter and Filter over every node for pod; it returns the state, the
// PreFilter status and the nodes that passed.
func (b *testBed) cycle(p *Plugin, pod *v1.Pod) (*framework.CycleState, *framework.Status, []string) {
	b.t.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	res, st := p.PreFilter(ctx, state, pod)
	if !st.IsSuccess() {
		return state, st, nil
	}
	nodes, _ := b.h.inf.Core().V1().Nodes().Lister().List(labels.Everything())
	var passed []string
	for _, n := range nodes {
		if res != nil && res.NodeNames != nil && !res.NodeNames.Has(n.Name) {
			continue
		}
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		if p.Filter(ctx, state, pod, ni).IsSuccess() {
			passed = append(passed, n.Name)
		}
	}
	return state, st, passed
}
