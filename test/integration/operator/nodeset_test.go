//go:build integration

package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sunk.dev/sunk/internal/kube"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// kubelet plays the scheduler and kubelet for compute pods: it binds pending pods to a
// node their placement allows, registers their slurmd with the fake Slurm (a replacement
// finds the record of the pod it replaces, as a real slurmd does), marks them Ready, and
// stops pods being deleted. At every stop it looks at the pod's Slurm node: the controller
// must never have deleted a pod whose node runs a job.
type kubelet struct {
	h *harness

	mu         sync.Mutex
	stops      []stop         // in the order the pods were stopped
	registered map[string]int // times a slurmd registered a new Slurm node record, by name
	violations []string       // busy pods that were deleted
	// track, when set, names the members whose unavailability is sampled at every step;
	// maxUnavailable is the most seen at once.
	track          []string
	maxUnavailable int
}

type stop struct {
	pod    string
	hash   string
	state  []string // of its Slurm node when the pod was stopped; nil: not registered
	reason string
}

func (h *harness) startKubelet(t *testing.T) *kubelet {
	k := &kubelet{h: h, registered: map[string]int{}}
	h.k = k
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := k.step(ctx); err != nil && ctx.Err() == nil {
					t.Logf("kubelet: %v", err)
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, v := range k.violations {
			t.Errorf("a pod was deleted while its Slurm node ran a job: %s", v)
		}
	})
	return k
}

func slurmBusy(n *slurm.Node) bool {
	return n.HasState("ALLOCATED") || n.HasState("MIXED") || n.HasState("COMPLETING")
}

func (k *kubelet) step(ctx context.Context) error {
	h := k.h
	var pods corev1.PodList
	if err := h.c.List(ctx, &pods, client.InNamespace(h.ns), client.MatchingLabels{wellknown.LabelComponent: wellknown.ComponentCompute}); err != nil {
		return err
	}
	var nodes corev1.NodeList
	if err := h.c.List(ctx, &nodes); err != nil {
		return err
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case !p.DeletionTimestamp.IsZero():
			if p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0 {
				continue // stopped already; the finalizer is the controller's
			}
			if err := k.stop(ctx, p); err != nil {
				return err
			}
		case p.Spec.NodeName == "":
			if err := k.bind(ctx, p, nodes.Items); err != nil {
				return err
			}
		case !kube.PodReady(p):
			if err := k.start(ctx, p); err != nil {
				return err
			}
		}
	}
	if k.track != nil {
		k.sample(ctx, pods.Items)
	}
	return nil
}

func (k *kubelet) stop(ctx context.Context, p *corev1.Pod) error {
	rec := stop{pod: p.Name, hash: p.Labels[wellknown.LabelTemplateHash]}
	if p.Spec.NodeName != "" {
		n, err := k.h.slurm.GetNode(ctx, p.Name)
		switch {
		case errors.Is(err, slurm.ErrNotFound):
		case err != nil:
			return nil // Slurm is made to fail: look again next time
		default:
			rec.state, rec.reason = n.State, n.Reason
			if slurmBusy(n) {
				k.mu.Lock()
				k.violations = append(k.violations, fmt.Sprintf("%s (Slurm state %v)", p.Name, n.State))
				k.mu.Unlock()
			}
		}
	}
	k.mu.Lock()
	k.stops = append(k.stops, rec)
	k.mu.Unlock()
	return client.IgnoreNotFound(k.h.c.Delete(ctx, p, client.GracePeriodSeconds(0), client.Preconditions{UID: &p.UID}))
}

func (k *kubelet) bind(ctx context.Context, p *corev1.Pod, nodes []corev1.Node) error {
	target := ""
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				target = f.Values[0]
			}
		}
	}
	if target == "" {
		for _, n := range nodes {
			if labels.SelectorFromSet(p.Spec.NodeSelector).Matches(labels.Set(n.Labels)) {
				target = n.Name
				break
			}
		}
	}
	if target == "" {
		return nil // unschedulable
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: target}}
	if err := k.h.c.SubResource("binding").Create(ctx, p, b); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("binding %s: %w", p.Name, err)
	}
	return nil
}

// start registers the pod's slurmd and marks the pod Ready, as the readiness probe would.
// Like slurmctld, it creates a record (IDLE, with the NodeSet's feature) only for a name it
// does not know; a known name keeps its record and state.
func (k *kubelet) start(ctx context.Context, p *corev1.Pod) error {
	_, err := k.h.slurm.GetNode(ctx, p.Name)
	switch {
	case errors.Is(err, slurm.ErrNotFound):
		k.h.slurm.AddNode(slurm.Node{Name: p.Name, Hostname: p.Spec.Hostname, State: []string{"IDLE"}, Features: []string{p.Labels[wellknown.LabelNodeSet]}})
		k.mu.Lock()
		k.registered[p.Name]++
		k.mu.Unlock()
	case err != nil:
		return nil
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return client.IgnoreNotFound(k.h.c.Status().Update(ctx, p))
}

// sample counts the tracked members that cannot take jobs: no pod, a pod not Ready or
// going, or a Slurm node drained by the NodeSet.
func (k *kubelet) sample(ctx context.Context, pods []corev1.Pod) {
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	list, err := k.h.slurm.ListNodes(ctx, time.Time{})
	if err != nil {
		return
	}
	drained := map[string]bool{}
	for _, n := range list.Nodes {
		drained[n.Name] = n.Drained() && wellknown.DrainByNodeSet(n.Reason)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	count := 0
	for _, name := range k.track {
		if p := byName[name]; p == nil || !kube.PodReady(p) || drained[name] {
			count++
		}
	}
	k.maxUnavailable = max(k.maxUnavailable, count)
}

func (k *kubelet) stopped() []stop {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.stops)
}

// slurmCluster creates a SlurmCluster and waits for what NodeSets need of it: the JWT key
// and the slurmrestd Service.
func (h *harness) slurmCluster(t *testing.T, name string) {
	t.Helper()
	sc := newCluster(h.ns, name)
	sc.Spec.Prolog, sc.Spec.Accounting.Mode = nil, sunkv1.AccountingNone
	if err := h.c.Create(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "JWT key and slurmrestd Service", func() error {
		if err := h.get(t, name+"-jwt-key", &corev1.Secret{}); err != nil {
			return err
		}
		return h.get(t, name+"-restapi", &corev1.Service{})
	})
}

func (h *harness) node(t *testing.T, name string, l map[string]string) {
	t.Helper()
	if err := h.c.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}); err != nil {
		t.Fatal(err)
	}
}

func newNodeSet(ns, name, cluster string) *sunkv1.NodeSet {
	return &sunkv1.NodeSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       sunkv1.NodeSetSpec{ClusterRef: cluster, Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("4Gi")}}},
	}
}

func (h *harness) nodeSet(t *testing.T, name string) *sunkv1.NodeSet {
	t.Helper()
	ns := &sunkv1.NodeSet{}
	if err := h.get(t, name, ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// updateNodeSet changes a NodeSet's spec, retrying when its status was written meanwhile.
func (h *harness) updateNodeSet(t *testing.T, name string, mutate func(*sunkv1.NodeSet)) error {
	t.Helper()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns := h.nodeSet(t, name)
		mutate(ns)
		return h.c.Update(context.Background(), ns)
	})
}

func nsCondition(ns *sunkv1.NodeSet, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(ns.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// pods are the live (not terminating) compute pods of a NodeSet, by name.
func (h *harness) pods(t *testing.T, nodeSet string) map[string]*corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := h.c.List(context.Background(), &list, client.InNamespace(h.ns), client.MatchingLabels{wellknown.LabelNodeSet: nodeSet}); err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			out[list.Items[i].Name] = &list.Items[i]
		}
	}
	return out
}

// allPods are every compute pod of a NodeSet, terminating ones included.
func (h *harness) allPods(t *testing.T, nodeSet string) []string {
	t.Helper()
	var list corev1.PodList
	if err := h.c.List(context.Background(), &list, client.InNamespace(h.ns), client.MatchingLabels{wellknown.LabelNodeSet: nodeSet}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// readyNodeSet waits until a NodeSet runs exactly want, all Ready and current, with the
// Ready condition true.
func (h *harness) readyNodeSet(t *testing.T, name string, want ...string) {
	t.Helper()
	eventually(t, name+" ready with "+strings.Join(want, ","), func() error {
		if got := h.allPods(t, name); !slices.Equal(got, want) {
			return fmt.Errorf("pods %v", got)
		}
		ns := h.nodeSet(t, name)
		s := ns.Status
		if c := nsCondition(ns, sunkv1.ConditionReady); c.Status != metav1.ConditionTrue || s.ObservedGeneration != ns.Generation {
			return fmt.Errorf("Ready %+v, status %+v", c, s)
		}
		if n := int32(len(want)); s.Replicas != n || s.Ready != n || s.Updated != n || s.Desired != n || s.Scheduled != n || s.Unavailable != 0 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
}

func (h *harness) slurmNode(t *testing.T, name string) (*slurm.Node, error) {
	t.Helper()
	return h.slurm.GetNode(context.Background(), name)
}

// setSlurmState changes a node's base state as Slurm's scheduler would (flags stay).
func (h *harness) setSlurmState(t *testing.T, name, state string) {
	t.Helper()
	if err := h.slurm.UpdateNode(context.Background(), name, slurm.NodeUpdate{State: slurm.NodeState(state)}); err != nil {
		t.Fatal(err)
	}
}

func TestNodeSetPerNodeAndConflicts(t *testing.T) {
	h := start(t)
	h.startKubelet(t)
	ctx := context.Background()
	h.slurmCluster(t, "c1")
	h.node(t, "n1.example.com", map[string]string{"pool": "cpu"})
	h.node(t, "n2", map[string]string{"pool": "cpu"})
	h.node(t, "n3", map[string]string{"pool": "gpu"})

	a := newNodeSet(h.ns, "cpu-a", "c1")
	a.Spec.NodeSelector = map[string]string{"pool": "cpu"}
	if err := h.c.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	h.readyNodeSet(t, "cpu-a", "cpu-a-n1-example-com", "cpu-a-n2")
	p := h.pods(t, "cpu-a")["cpu-a-n1-example-com"]
	if p.Spec.Hostname != p.Name || p.Spec.NodeName != "n1.example.com" || p.Labels[wellknown.LabelSlurmNode] != p.Name ||
		!metav1.IsControlledBy(p, h.nodeSet(t, "cpu-a")) || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] != "n1.example.com" {
		t.Errorf("pod %s: hostname %q, node %q, labels %v, affinity %+v", p.Name, p.Spec.Hostname, p.Spec.NodeName, p.Labels, p.Spec.Affinity)
	}
	if env := p.Spec.Containers[0].Env; env[1].Name != "SLURMD_CONF" || env[1].Value != "CPUs=2 RealMemory=3892 Features=cpu-a Weight=1" {
		t.Errorf("slurmd env %v", env)
	}
	if s := h.nodeSet(t, "cpu-a").Status; s.Feasible != 2 || s.Selector == "" || s.TemplateHash != p.Labels[wellknown.LabelTemplateHash] {
		t.Errorf("status %+v", s)
	}

	// A younger NodeSet that selects every node gets only the one nobody holds, and says why.
	b := newNodeSet(h.ns, "cpu-b", "c1")
	b.Spec.Affinity = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"cpu", "gpu"}}}}}}
	if err := h.c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	h.readyNodeSet(t, "cpu-b", "cpu-b-n3")
	eventually(t, "conflict reported", func() error {
		c := nsCondition(h.nodeSet(t, "cpu-b"), sunkv1.ConditionNodeConflict)
		if c.Status != metav1.ConditionTrue || c.Reason != sunkv1.ReasonNodeHeld ||
			!strings.Contains(c.Message, "node n1.example.com is held by the older NodeSet cpu-a") || !strings.Contains(c.Message, "node n2 is held") {
			return fmt.Errorf("NodeConflict %+v", c)
		}
		if s := h.nodeSet(t, "cpu-b").Status; s.Feasible != 1 || s.Desired != 1 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	if c := nsCondition(h.nodeSet(t, "cpu-a"), sunkv1.ConditionNodeConflict); c.Status != metav1.ConditionFalse {
		t.Errorf("the older NodeSet reports a conflict: %+v", c)
	}
	eventually(t, "conflict event", func() error { return h.event("cpu-b", sunkv1.ReasonNodeHeld) })

	// n2 leaves cpu-a's selection: drained with the reason, deleted (idle), its Slurm
	// record removed; cpu-b does not select it either.
	n2 := &corev1.Node{}
	if err := h.c.Get(ctx, types.NamespacedName{Name: "n2"}, n2); err != nil {
		t.Fatal(err)
	}
	n2.Labels["pool"] = "other"
	if err := h.c.Update(ctx, n2); err != nil {
		t.Fatal(err)
	}
	h.readyNodeSet(t, "cpu-a", "cpu-a-n1-example-com")
	eventually(t, "Slurm record of cpu-a-n2 removed", func() error {
		if _, err := h.slurmNode(t, "cpu-a-n2"); !errors.Is(err, slurm.ErrNotFound) {
			return fmt.Errorf("GetNode: %v", err)
		}
		return nil
	})
	stops := h.k.stopped()
	if i := slices.IndexFunc(stops, func(s stop) bool { return s.pod == "cpu-a-n2" }); i < 0 {
		t.Error("cpu-a-n2 was never stopped")
	} else if s := stops[i]; !slices.Contains(s.state, "DRAIN") || s.reason != "k8s: nodeset node no longer selected" {
		t.Errorf("cpu-a-n2 stopped with Slurm state %v, reason %q", s.state, s.reason)
	}
	h.readyNodeSet(t, "cpu-b", "cpu-b-n3")
}

// event finds an event of the given reason about the named object.
func (h *harness) event(regarding, reason string) error {
	var list eventsv1.EventList
	if err := h.c.List(context.Background(), &list, client.InNamespace(h.ns)); err != nil {
		return err
	}
	for _, e := range list.Items {
		if e.Regarding.Name == regarding && e.Reason == reason {
			return nil
		}
	}
	return fmt.Errorf("no %s event about %s among %d events", reason, regarding, len(list.Items))
}

func TestNodeSetReplicasProtectedScaleIn(t *testing.T) {
	h := start(t)
	k := h.startKubelet(t)
	ctx := context.Background()
	h.slurmCluster(t, "c2")
	h.node(t, "m1", map[string]string{"pool": "cpu"})

	ns := newNodeSet(h.ns, "rep", "c2")
	ns.Spec.Mode, ns.Spec.Replicas = sunkv1.NodeSetReplicas, ptr.To(int32(3))
	if err := h.c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	h.readyNodeSet(t, "rep", "rep-0", "rep-1", "rep-2")
	for name := range h.pods(t, "rep") {
		if n, err := h.slurmNode(t, name); err != nil || n.Drained() {
			t.Fatalf("Slurm node %s: %+v %v", name, n, err)
		}
	}
	// A job runs on rep-2.
	h.setSlurmState(t, "rep-2", "ALLOCATED")
	eventually(t, "busy counted", func() error {
		if s := h.nodeSet(t, "rep").Status; s.Busy != 1 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})

	// Scale 3 -> 1 through the scale subresource, as kubectl scale does.
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 1}}
	if err := h.c.SubResource("scale").Update(ctx, h.nodeSet(t, "rep"), client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	// rep-1 is idle: drained, deleted at once, its record removed. rep-2 is drained and
	// waits for its job.
	eventually(t, "rep-1 gone, rep-2 drained and kept", func() error {
		if got := h.allPods(t, "rep"); !slices.Equal(got, []string{"rep-0", "rep-2"}) {
			return fmt.Errorf("pods %v", got)
		}
		if _, err := h.slurmNode(t, "rep-1"); !errors.Is(err, slurm.ErrNotFound) {
			return fmt.Errorf("rep-1's record: %v", err)
		}
		n, err := h.slurmNode(t, "rep-2")
		if err != nil || !n.Drained() || n.Reason != "k8s: nodeset scale-in" {
			return fmt.Errorf("rep-2 in Slurm: %+v %v", n, err)
		}
		ns := h.nodeSet(t, "rep")
		if c := nsCondition(ns, sunkv1.ConditionReady); c.Reason != sunkv1.ReasonWaitingForJobs || !strings.Contains(c.Message, "rep-2") {
			return fmt.Errorf("Ready %+v", c)
		}
		if s := ns.Status; s.Desired != 1 || s.Replicas != 2 || s.Busy != 1 || s.Drained != 1 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	stops := k.stopped()
	if len(stops) != 1 || stops[0].pod != "rep-1" || !slices.Contains(stops[0].state, "DRAIN") || stops[0].reason != "k8s: nodeset scale-in" {
		t.Fatalf("stops %+v", stops)
	}
	// The controller keeps looking (it polls Slurm) and keeps rep-2 while the job runs.
	polls := h.slurm.Calls("GetNode")
	eventually(t, "several more looks at rep-2", func() error {
		if got := h.slurm.Calls("GetNode"); got < polls+5 {
			return fmt.Errorf("%d GetNode calls since", got-polls)
		}
		return nil
	})
	if p := h.pods(t, "rep")["rep-2"]; p == nil {
		t.Fatal("rep-2 was deleted while its job ran")
	}

	// The job ends: rep-2 goes, and its Slurm record with it.
	h.setSlurmState(t, "rep-2", "IDLE")
	h.readyNodeSet(t, "rep", "rep-0")
	eventually(t, "rep-2's record removed", func() error {
		if _, err := h.slurmNode(t, "rep-2"); !errors.Is(err, slurm.ErrNotFound) {
			return fmt.Errorf("rep-2's record: %v", err)
		}
		return nil
	})
	if n, err := h.slurmNode(t, "rep-0"); err != nil || n.Drained() {
		t.Errorf("rep-0 was touched: %+v %v", n, err)
	}
}

func TestNodeSetRollingUpdateIdleFirstOneAtATime(t *testing.T) {
	h := start(t)
	k := h.startKubelet(t)
	ctx := context.Background()
	h.slurmCluster(t, "c3")
	h.node(t, "m1", nil)

	ns := newNodeSet(h.ns, "roll", "c3")
	ns.Spec.Mode, ns.Spec.Replicas = sunkv1.NodeSetReplicas, ptr.To(int32(3))
	if err := h.c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	members := []string{"roll-0", "roll-1", "roll-2"}
	h.readyNodeSet(t, "roll", members...)
	oldHash := h.nodeSet(t, "roll").Status.TemplateHash
	// The first member runs a job: it must be replaced last, after its job.
	h.setSlurmState(t, "roll-0", "ALLOCATED")
	k.mu.Lock()
	k.track = members
	k.mu.Unlock()

	if err := h.updateNodeSet(t, "roll", func(ns *sunkv1.NodeSet) { ns.Spec.Features = []string{"v2"} }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "idle members replaced, the busy one drained and waiting", func() error {
		ns := h.nodeSet(t, "roll")
		if ns.Status.TemplateHash == oldHash {
			return fmt.Errorf("template hash unchanged")
		}
		pods := h.pods(t, "roll")
		for _, name := range []string{"roll-1", "roll-2"} {
			p := pods[name]
			if p == nil || p.Labels[wellknown.LabelTemplateHash] != ns.Status.TemplateHash || !kube.PodReady(p) {
				return fmt.Errorf("%s not replaced yet", name)
			}
			if n, err := h.slurmNode(t, name); err != nil || n.Drained() {
				return fmt.Errorf("%s not resumed: %+v %v", name, n, err)
			}
		}
		if p := pods["roll-0"]; p == nil || p.Labels[wellknown.LabelTemplateHash] != oldHash {
			return fmt.Errorf("roll-0 replaced while its job runs")
		}
		if n, err := h.slurmNode(t, "roll-0"); err != nil || !n.Drained() || n.Reason != "k8s: nodeset update" {
			return fmt.Errorf("roll-0 in Slurm: %+v %v", n, err)
		}
		if c := nsCondition(ns, sunkv1.ConditionReady); c.Reason != sunkv1.ReasonWaitingForJobs {
			return fmt.Errorf("Ready %+v", c)
		}
		if s := ns.Status; s.Updated != 2 || s.Busy != 1 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})

	h.setSlurmState(t, "roll-0", "IDLE")
	h.readyNodeSet(t, "roll", members...)
	eventually(t, "roll-0 resumed", func() error {
		if n, err := h.slurmNode(t, "roll-0"); err != nil || n.Drained() {
			return fmt.Errorf("roll-0: %+v %v", n, err)
		}
		return nil
	})

	var order []string
	for _, s := range k.stopped() {
		order = append(order, s.pod)
		if s.hash != oldHash || !slices.Contains(s.state, "DRAIN") || s.reason != "k8s: nodeset update" {
			t.Errorf("stop %+v: want an old pod, drained for the update", s)
		}
	}
	if !slices.Equal(order, []string{"roll-1", "roll-2", "roll-0"}) {
		t.Errorf("replacement order %v, want the idle ones first by name, then the busy one", order)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, name := range members {
		// The replacements registered afresh, so Slurm took their new --conf.
		if k.registered[name] != 2 {
			t.Errorf("%s registered %d Slurm records, want 2 (its record removed before the replacement)", name, k.registered[name])
		}
	}
	if k.maxUnavailable != 1 {
		t.Errorf("at most %d members were unavailable at once, want 1 (maxUnavailable)", k.maxUnavailable)
	}
}

// TestNodeSetReplacementKeepsForeignDrain: a replaced node that a person drained keeps its
// Slurm record, and with it the drain; the controller never lifts it.
func TestNodeSetReplacementKeepsForeignDrain(t *testing.T) {
	h := start(t)
	k := h.startKubelet(t)
	ctx := context.Background()
	h.slurmCluster(t, "c6")
	h.node(t, "m1", nil)

	ns := newNodeSet(h.ns, "keep", "c6")
	ns.Spec.Mode, ns.Spec.Replicas = sunkv1.NodeSetReplicas, ptr.To(int32(2))
	if err := h.c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	h.readyNodeSet(t, "keep", "keep-0", "keep-1")
	oldHash := h.nodeSet(t, "keep").Status.TemplateHash
	reason := "bad DIMM, ticket 42"
	if err := h.slurm.UpdateNode(ctx, "keep-0", slurm.NodeUpdate{State: slurm.NodeStateDrain, Reason: &reason}); err != nil {
		t.Fatal(err)
	}
	if err := h.updateNodeSet(t, "keep", func(ns *sunkv1.NodeSet) { ns.Spec.Image = "sunk.dev/slurm:next" }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both replaced", func() error {
		if len(k.stopped()) != 2 {
			return fmt.Errorf("stops %+v", k.stopped())
		}
		ns := h.nodeSet(t, "keep")
		if ns.Status.TemplateHash == oldHash || ns.Status.Updated != 2 || ns.Status.Ready != 2 {
			return fmt.Errorf("status %+v", ns.Status)
		}
		return nil
	})
	if n, err := h.slurmNode(t, "keep-0"); err != nil || !n.Drained() || n.Reason != reason {
		t.Errorf("keep-0 in Slurm: %+v %v, want still drained by the person", n, err)
	}
	if n, err := h.slurmNode(t, "keep-1"); err != nil || n.Drained() {
		t.Errorf("keep-1 in Slurm: %+v %v", n, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.registered["keep-0"] != 1 || k.registered["keep-1"] != 2 {
		t.Errorf("registrations %v: keep-0's record must be kept, keep-1's made anew", k.registered)
	}
	if err := h.event("keep", sunkv1.ReasonRecordKept); err != nil {
		t.Error(err)
	}
}

func TestNodeSetSlurmUnreachableDeletesNothing(t *testing.T) {
	h := start(t)
	k := h.startKubelet(t)
	ctx := context.Background()
	h.slurmCluster(t, "c4")
	h.node(t, "m1", nil)

	ns := newNodeSet(h.ns, "fc", "c4")
	ns.Spec.Mode, ns.Spec.Replicas = sunkv1.NodeSetReplicas, ptr.To(int32(2))
	if err := h.c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	h.readyNodeSet(t, "fc", "fc-0", "fc-1")

	down := fmt.Errorf("slurmrestd: %w: connection refused", slurm.ErrUnavailable)
	h.slurm.SetError("*", down)
	if err := h.updateNodeSet(t, "fc", func(ns *sunkv1.NodeSet) {
		ns.Spec.Replicas = ptr.To(int32(0))
		ns.Spec.Weight = ptr.To(int32(5)) // and a template change
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Slurm reported unreachable", func() error {
		ns := h.nodeSet(t, "fc")
		c, r := nsCondition(ns, sunkv1.ConditionSlurmReachable), nsCondition(ns, sunkv1.ConditionReady)
		if c.Status != metav1.ConditionFalse || c.Reason != sunkv1.ReasonSlurmUnreachable || !strings.Contains(c.Message, "connection refused") ||
			r.Reason != sunkv1.ReasonSlurmUnreachable || ns.Status.ObservedGeneration != ns.Generation {
			return fmt.Errorf("SlurmReachable %+v, Ready %+v", c, r)
		}
		return nil
	})
	// The controller keeps trying and keeps failing closed: no drain, no deletion.
	lists := h.slurm.Calls("ListNodes")
	eventually(t, "several more reconciles", func() error {
		if got := h.slurm.Calls("ListNodes"); got < lists+5 {
			return fmt.Errorf("%d ListNodes calls since", got-lists)
		}
		return nil
	})
	if got := h.allPods(t, "fc"); !slices.Equal(got, []string{"fc-0", "fc-1"}) || len(h.pods(t, "fc")) != 2 {
		t.Fatalf("pods %v deleted while Slurm was unreachable", got)
	}
	if len(k.stopped()) != 0 {
		t.Fatalf("pods stopped: %+v", k.stopped())
	}
	eventually(t, "warning event", func() error { return h.event("fc", sunkv1.ReasonSlurmUnreachable) })

	// Slurm answers again: the scale-in goes on, the protected way.
	h.slurm.SetError("*", nil)
	eventually(t, "scaled in", func() error {
		if got := h.allPods(t, "fc"); len(got) != 0 {
			return fmt.Errorf("pods %v", got)
		}
		if c := nsCondition(h.nodeSet(t, "fc"), sunkv1.ConditionSlurmReachable); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("SlurmReachable %+v", c)
		}
		return nil
	})
	for _, s := range k.stopped() {
		if !slices.Contains(s.state, "DRAIN") || !strings.HasPrefix(s.reason, "k8s: ") {
			t.Errorf("stopped undrained: %+v", s)
		}
	}
}

func TestNodeSetAdmission(t *testing.T) {
	h := start(t)
	for name, c := range map[string]struct {
		mutate func(*sunkv1.NodeSet)
		want   string
	}{
		"Replicas without replicas": {func(ns *sunkv1.NodeSet) { ns.Spec.Mode = sunkv1.NodeSetReplicas }, "spec.replicas is required when mode is Replicas"},
		"extraConf with Features":   {func(ns *sunkv1.NodeSet) { ns.Spec.ExtraConf = "Gres=gpu:1 Features=x" }, "spec.extraConf must not set Features"},
		"long name":                 {func(ns *sunkv1.NodeSet) { ns.Name = strings.Repeat("a", 41) }, "at most 40 characters"},
		"bad feature":               {func(ns *sunkv1.NodeSet) { ns.Spec.Features = []string{"a b"} }, "spec.features[0]"},
		// The CEL rule sees no "Features=" here; the webhook reads the line as Slurm does.
		"extraConf with Features =":      {func(ns *sunkv1.NodeSet) { ns.Spec.ExtraConf = "Gres=gpu:1 Features =x" }, "spec.extraConf: Forbidden: Features"},
		"extraConf with a top-level key": {func(ns *sunkv1.NodeSet) { ns.Spec.ExtraConf = "Gres=gpu:1 AuthType=auth/none" }, "not a parameter of a NodeName line"},
		"containers: a registry with a path": {func(ns *sunkv1.NodeSet) {
			ns.Spec.Containers = &sunkv1.NodeSetContainers{Enabled: true, InsecureRegistries: []string{"reg:5000/team"}}
		}, "spec.containers.insecureRegistries[0]"},
		"containers: cacheSize and cacheVolume": {func(ns *sunkv1.NodeSet) {
			ns.Spec.Containers = &sunkv1.NodeSetContainers{Enabled: true, CacheSize: ptr.To(resource.MustParse("1Gi")),
				CacheVolume: &corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
		}, "spec.containers.cacheSize and spec.containers.cacheVolume are exclusive"},
		"containers: an imagePullSecret that is no name": {func(ns *sunkv1.NodeSet) {
			ns.Spec.Containers = &sunkv1.NodeSetContainers{Enabled: true, ImagePullSecrets: []sunkv1.SecretName{{Name: "ok"}, {Name: "Not_A_Name"}}}
		}, "spec.containers.imagePullSecrets[1].name"},
		"autoscaling with min above max": {func(ns *sunkv1.NodeSet) {
			ns.Spec.Mode, ns.Spec.Autoscaling = sunkv1.NodeSetReplicas, &sunkv1.NodeSetAutoscaling{MinReplicas: 3, MaxReplicas: 2}
		}, "spec.autoscaling.minReplicas must not exceed spec.autoscaling.maxReplicas"},
		"autoscaling without max": {func(ns *sunkv1.NodeSet) {
			ns.Spec.Mode, ns.Spec.Autoscaling = sunkv1.NodeSetReplicas, &sunkv1.NodeSetAutoscaling{}
		}, "spec.autoscaling.maxReplicas"},
		"env overriding the node line": {func(ns *sunkv1.NodeSet) {
			ns.Spec.Env = []corev1.EnvVar{{Name: "SLURMD_CONF", Value: "Features=x"}}
		}, "spec.env[0].name"},
	} {
		t.Run(name, func(t *testing.T) {
			ns := newNodeSet(h.ns, "bad", "c")
			c.mutate(ns)
			if err := h.c.Create(context.Background(), ns); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("create: %v, want an error containing %q", err, c.want)
			}
		})
	}
	ns := newNodeSet(h.ns, "good", "c")
	if err := h.c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	if ns.Spec.Mode != sunkv1.NodeSetPerNode || ns.Spec.UpdateStrategy.Type != sunkv1.RollingUpdateNodeSetStrategy {
		t.Errorf("defaults: %+v", ns.Spec)
	}
	// A PerNode NodeSet autoscales too, with a maxReplicas above the nodes it selects.
	autoscaled := newNodeSet(h.ns, "autoscaled", "c")
	autoscaled.Spec.Autoscaling = &sunkv1.NodeSetAutoscaling{MinReplicas: 1, MaxReplicas: 100}
	if err := h.c.Create(context.Background(), autoscaled); err != nil {
		t.Fatalf("an autoscaled PerNode NodeSet: %v", err)
	}
	err := h.updateNodeSet(t, "good", func(ns *sunkv1.NodeSet) { ns.Spec.ClusterRef = "other" })
	if err == nil || !strings.Contains(err.Error(), "spec.clusterRef is immutable") {
		t.Fatalf("update of clusterRef: %v", err)
	}
	// Without its SlurmCluster the NodeSet says so and creates nothing.
	eventually(t, "ClusterNotFound", func() error {
		if c := nsCondition(h.nodeSet(t, "good"), sunkv1.ConditionReady); c.Reason != sunkv1.ReasonClusterNotFound {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
}

// TestNodeSetDeletedReleasesItsPods: once a NodeSet is gone, the garbage collector deletes
// its pods (played here: envtest runs no controller-manager) and the controller still
// removes their Slurm records before letting them go.
func TestNodeSetDeletedReleasesItsPods(t *testing.T) {
	h := start(t)
	h.startKubelet(t)
	ctx := context.Background()
	h.slurmCluster(t, "c5")
	h.node(t, "m1", nil)

	ns := newNodeSet(h.ns, "gone", "c5")
	ns.Spec.Mode, ns.Spec.Replicas = sunkv1.NodeSetReplicas, ptr.To(int32(2))
	if err := h.c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	h.readyNodeSet(t, "gone", "gone-0", "gone-1")
	if err := h.c.Delete(ctx, h.nodeSet(t, "gone")); err != nil {
		t.Fatal(err)
	}
	for name := range h.pods(t, "gone") {
		if err := h.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "pods released and records removed", func() error {
		if got := h.allPods(t, "gone"); len(got) != 0 {
			return fmt.Errorf("pods %v", got)
		}
		for _, name := range []string{"gone-0", "gone-1"} {
			if _, err := h.slurmNode(t, name); !errors.Is(err, slurm.ErrNotFound) {
				return fmt.Errorf("%s's record: %v", name, err)
			}
		}
		return nil
	})
}
