//go:build integration

// Package syncer_test runs internal/syncer against the real Slurm 24.11 of the test bed
// (hack/env-slurm.sh) and a real kube-apiserver (envtest). The test bed's nodes slurm-n1..3
// are given compute pods of the same names, bound to Kubernetes nodes k8s-n1..3 (no kubelet:
// the test writes the pods' and nodes' status as a kubelet would). Every test leaves the test
// bed as it found it: nodes registered, resumed and idle.
package syncer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/syncer"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

const (
	ns          = "slurm"
	clusterName = "sunk-test"
	testFeature = "sunk-test" // the test bed's nodes carry it; only they are the test's
	poll        = 300 * time.Millisecond
	holdPod     = "test.sunk.dev/hold"
	// notReadyGrace is the syncer's grace for "pod not Ready" here: long enough to watch a
	// node not being drained during it.
	notReadyGrace = 3 * time.Second
)

type harness struct {
	t       *testing.T // the running step
	top     *testing.T // the whole test: cleanups
	env     *testenv.SlurmEnv
	cfg     *rest.Config
	c       client.Client
	sl      slurm.Client
	metrics *syncer.Metrics
	reg     *prometheus.Registry
	events  *recorder
	// changes, when set, feeds the next started syncer's node cache (the node watcher).
	changes slurm.NodeChangeSource
	// stop stops the running syncer (and its cache) and waits for it.
	stop func()
	s    *syncer.Syncer
}

func setup(t *testing.T) *harness {
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	env := testenv.Slurm(t)
	cfg := testenv.API(t, testenv.APIOptions{})
	c, sl := clients(t, env, cfg)
	h := &harness{t: t, top: t, env: env, cfg: cfg, c: c, sl: sl, events: &recorder{}}
	h.newMetrics()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for i, name := range env.Nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k8sNode(i)}}
		if err := c.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		h.setNodeReady(k8sNode(i), true)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
				wellknown.LabelCluster: clusterName, wellknown.LabelComponent: wellknown.ComponentCompute, wellknown.LabelNodeSet: "gpu"}},
			Spec: corev1.PodSpec{NodeName: k8sNode(i), Hostname: name,
				Containers: []corev1.Container{{Name: "slurmd", Image: "sunk.dev/slurm:24.11-local"}}},
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		// Kubelet's story of a pod: not Ready since a minute ago, its container started 50s
		// ago, Ready now.
		h.startContainer(name, time.Now().Add(-time.Minute), time.Now().Add(-50*time.Second))
		h.setPodReady(name, true)
	}
	t.Cleanup(h.restoreTestBed)
	return h
}

// clients are the test's (or benchmark's) own: a direct Kubernetes client and a Slurm REST
// client, both past the syncer's caches.
func clients(tb testing.TB, env *testenv.SlurmEnv, cfg *rest.Config) (client.Client, slurm.Client) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		tb.Fatal(err)
	}
	tokens, err := slurm.NewJWTSource(env.User, env.JWTKey(tb), slurm.WithLifetime(time.Hour))
	if err != nil {
		tb.Fatal(err)
	}
	// The client sunk's syncer has (internal/slurmconn): the newest version both know.
	sl, err := slurm.NewDiscovering(slurm.Config{URL: env.RESTURL, Tokens: tokens, Timeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := sl.Ping(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("slurmrestd %s: REST API %s", env.RESTURL, sl.APIVersion())
	return c, sl
}

func k8sNode(i int) string { return fmt.Sprintf("k8s-n%d", i+1) }

func (h *harness) newMetrics() {
	h.reg = prometheus.NewRegistry()
	m, err := syncer.NewMetrics(h.reg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.metrics = m
}

// start runs a syncer, with its own cache, as sunk-syncer does for one SlurmCluster.
func (h *harness) start() {
	h.t.Helper()
	scheme := h.c.Scheme()
	kc, err := cache.New(h.cfg, cache.Options{Scheme: scheme})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := syncer.IndexPodsByNode(ctx, kc); err != nil {
		h.t.Fatal(err)
	}
	h.s = syncer.New(syncer.Config{
		Namespace: ns, Cluster: clusterName, Slurm: h.sl, NodeChanges: h.changes, PollInterval: poll,
		Owns:        func(n *slurm.Node) bool { return n.HasState("DYNAMIC_NORM") && contains(n.Features, testFeature) },
		OrphanGrace: 2 * time.Second, NotReadyGrace: notReadyGrace, Metrics: h.metrics, Recorder: h.events,
	}, h.c, kc, h.c)
	cacheDone, syncDone := make(chan error, 1), make(chan error, 1)
	go func() { cacheDone <- kc.Start(ctx) }()
	if !kc.WaitForCacheSync(ctx) {
		h.t.Fatal("cache did not sync")
	}
	go func() { syncDone <- h.s.Run(ctx) }()
	stopped := false
	h.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		for _, ch := range []chan error{syncDone, cacheDone} {
			if err := <-ch; err != nil && !errors.Is(err, context.Canceled) {
				h.t.Errorf("syncer: %v", err)
			}
		}
	}
	h.top.Cleanup(h.stop)
}

// restoreTestBed resumes what the tests drained and re-registers removed nodes.
func (h *harness) restoreTestBed() {
	if h.stop != nil {
		h.stop()
	}
	for _, name := range h.env.Nodes {
		n, err := h.sl.GetNode(context.Background(), name)
		if errors.Is(err, slurm.ErrNotFound) {
			if out, err := runHack("env-slurm.sh", "restart-node", name); err != nil {
				h.t.Errorf("re-registering %s: %v: %s", name, err, out)
			}
			continue
		}
		if err == nil && n.Drained() {
			_, _ = h.env.Exec("scontrol", "update", "nodename="+name, "state=resume")
		}
	}
}

func (h *harness) setNodeReady(name string, ready bool) {
	h.t.Helper()
	h.updateStatus(&corev1.Node{}, types.NamespacedName{Name: name}, func(o client.Object) {
		n := o.(*corev1.Node)
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		n.Status.Conditions = setCond(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: st, Reason: "Test"})
	})
}

// setPodReady sets the pod's Ready condition as kubelet does: the transition time changes
// only with the status, in whole seconds (what the apiserver keeps). It returns that time.
func (h *harness) setPodReady(name string, ready bool) time.Time {
	h.t.Helper()
	var at time.Time
	h.updateStatus(&corev1.Pod{}, types.NamespacedName{Namespace: ns, Name: name}, func(o client.Object) {
		p := o.(*corev1.Pod)
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Phase = corev1.PodRunning
		at = time.Now().Truncate(time.Second)
		cond := corev1.PodCondition{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(at)}
		for i, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				if c.Status == st {
					cond.LastTransitionTime, at = c.LastTransitionTime, c.LastTransitionTime.Time
				}
				p.Status.Conditions[i] = cond
				return
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, cond)
	})
	return at
}

// startContainer (re)starts the pod's container at started, as kubelet reports it: the
// pod is not Ready, since notReady (kubelet turns the condition False before it starts a
// container).
func (h *harness) startContainer(name string, notReady, started time.Time) {
	h.t.Helper()
	h.updateStatus(&corev1.Pod{}, types.NamespacedName{Namespace: ns, Name: name}, func(o client.Object) {
		p := o.(*corev1.Pod)
		p.Status.Phase = corev1.PodRunning
		restarts := int32(0)
		if len(p.Status.ContainerStatuses) == 1 {
			restarts = p.Status.ContainerStatuses[0].RestartCount + 1
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "slurmd", Image: p.Spec.Containers[0].Image,
			RestartCount: restarts, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}
		cond := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(notReady)}
		for i, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				p.Status.Conditions[i] = cond
				return
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, cond)
	})
}

func (h *harness) updateStatus(o client.Object, key types.NamespacedName, mutate func(client.Object)) {
	h.t.Helper()
	eventually(h.t, 10*time.Second, func() error {
		if err := h.c.Get(context.Background(), key, o); err != nil {
			return err
		}
		mutate(o)
		return h.c.Status().Update(context.Background(), o)
	})
}

func setCond(cs []corev1.NodeCondition, c corev1.NodeCondition) []corev1.NodeCondition {
	for i := range cs {
		if cs[i].Type == c.Type {
			cs[i] = c
			return cs
		}
	}
	return append(cs, c)
}

func (h *harness) cordon(node string, on bool, reason string) {
	h.t.Helper()
	h.updateNode(node, func(n *corev1.Node) {
		n.Spec.Unschedulable = on
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		if reason == "" {
			delete(n.Annotations, wellknown.AnnotationCordonReason)
		} else {
			n.Annotations[wellknown.AnnotationCordonReason] = reason
		}
	})
}

// updateNode reads a Kubernetes node, changes it and writes it back, again on a conflict (the
// syncer writes the same node).
func (h *harness) updateNode(node string, change func(*corev1.Node)) {
	h.t.Helper()
	eventually(h.t, 10*time.Second, func() error {
		n := &corev1.Node{}
		if err := h.c.Get(context.Background(), types.NamespacedName{Name: node}, n); err != nil {
			return err
		}
		change(n)
		return h.c.Update(context.Background(), n)
	})
}

// slurmNode reads a node with scontrol, past the REST API the syncer uses.
func (h *harness) slurmNode(name string) (state, reason string, err error) {
	out, err := h.env.Exec("scontrol", "-o", "show", "node", name)
	if err != nil {
		return "", "", fmt.Errorf("%v: %s", err, out)
	}
	state = field(out, "State=")
	if i := strings.Index(out, " Reason="); i >= 0 {
		reason = out[i+len(" Reason="):]
		if j := strings.Index(reason, " ["); j >= 0 { // "Reason=why [user@time]"
			reason = reason[:j]
		}
	}
	return state, reason, nil
}

func field(line, key string) string {
	i := strings.Index(line, key)
	if i < 0 {
		return ""
	}
	v := line[i+len(key):]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

func (h *harness) waitSlurm(name string, want func(state, reason string) bool, what string) {
	h.t.Helper()
	eventually(h.t, 15*time.Second, func() error {
		st, r, err := h.slurmNode(name)
		if err != nil {
			return err
		}
		if !want(st, r) {
			return fmt.Errorf("%s: Slurm node %s is %s (%q), want %s", h.t.Name(), name, st, r, what)
		}
		return nil
	})
}

func drainedWith(prefix string) func(string, string) bool {
	return func(st, r string) bool { return strings.Contains(st, "DRAIN") && strings.HasPrefix(r, prefix) }
}

func notDrained(st, _ string) bool {
	return !strings.Contains(st, "DRAIN") && strings.HasPrefix(st, "IDLE")
}

// mirror reads what the syncer wrote on a pod and its node.
type mirror struct {
	podState, podReason, nodeState, nodeReason string
	podCond, nodeCond                          string // "<status>/<reason>"
	nodeLabels                                 map[string]string
}

func (h *harness) mirror(pod string) (mirror, error) {
	var m mirror
	p := &corev1.Pod{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: pod}, p); err != nil {
		return m, err
	}
	n := &corev1.Node{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Name: p.Spec.NodeName}, n); err != nil {
		return m, err
	}
	m.podState, m.podReason = p.Annotations[wellknown.AnnotationSlurmState], p.Annotations[wellknown.AnnotationSlurmReason]
	m.nodeState, m.nodeReason = n.Annotations[wellknown.AnnotationSlurmState], n.Annotations[wellknown.AnnotationSlurmReason]
	m.nodeLabels = n.Labels
	for _, c := range p.Status.Conditions {
		if c.Type == wellknown.ConditionSlurmNode {
			m.podCond = string(c.Status) + "/" + c.Reason
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == wellknown.ConditionSlurmNode {
			m.nodeCond = string(c.Status) + "/" + c.Reason
		}
	}
	return m, nil
}

func (h *harness) waitMirror(pod string, want func(mirror) bool, what string) mirror {
	h.t.Helper()
	var last mirror
	eventually(h.t, 15*time.Second, func() error {
		m, err := h.mirror(pod)
		if err != nil {
			return err
		}
		last = m
		if !want(m) {
			return fmt.Errorf("mirror of %s is %+v, want %s", pod, m, what)
		}
		return nil
	})
	return last
}

// TestSyncer walks the protocol on one test bed, step by step; each step starts from the end
// state of the one before.
func TestSyncer(t *testing.T) {
	h := setup(t)
	h.start()
	n1, n2, n3 := h.env.Nodes[0], h.env.Nodes[1], h.env.Nodes[2]
	// Each step needs the one before to have passed; the harness reports to the running step.
	step := func(name string, f func(t *testing.T)) {
		parent := h.t
		ok := t.Run(name, func(t *testing.T) { h.t = t; f(t) })
		h.t = parent
		if !ok {
			t.FailNow()
		}
	}

	step("mirror: Slurm state on pods and nodes, labels on nodes", func(t *testing.T) {
		for i, name := range h.env.Nodes {
			m := h.waitMirror(name, func(m mirror) bool {
				return m.podState == "idle" && m.nodeState == "idle" && m.podCond == "True/Idle" && m.nodeCond == "True/Idle"
			}, "idle everywhere")
			if m.nodeLabels[wellknown.LabelCluster] != clusterName || m.nodeLabels[wellknown.LabelNodeSet] != "gpu" || m.nodeLabels[wellknown.LabelSlurmNode] != name {
				t.Errorf("labels of %s: %v", k8sNode(i), m.nodeLabels)
			}
		}
	})

	step("cordon drains with the reason, uncordon resumes", func(t *testing.T) {
		h.cordon(k8sNode(0), true, "bad GPU 3")
		h.waitSlurm(n1, drainedWith("k8s: node cordoned (bad GPU 3)"), "drained by the cordon")
		h.waitMirror(n1, func(m mirror) bool {
			return m.podState == "idle+drain" && m.podReason == "k8s: node cordoned (bad GPU 3)" &&
				m.podCond == "False/Drained" && m.nodeCond == "False/Drained"
		}, "drained, mirrored")
		h.cordon(k8sNode(0), false, "")
		h.waitSlurm(n1, notDrained, "resumed")
		h.waitMirror(n1, func(m mirror) bool { return m.podCond == "True/Idle" }, "available again")
	})

	step("resumed by hand while cordoned: drained again", func(t *testing.T) {
		h.cordon(k8sNode(0), true, "")
		h.waitSlurm(n1, drainedWith("k8s: node cordoned"), "drained")
		if out, err := h.env.Exec("scontrol", "update", "nodename="+n1, "state=resume"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		h.waitSlurm(n1, drainedWith("k8s: node cordoned"), "drained again")
		h.cordon(k8sNode(0), false, "")
		h.waitSlurm(n1, notDrained, "resumed")
	})

	step("a person's drain is mirrored and survives cordon and uncordon", func(t *testing.T) {
		const why = "memory test by alice"
		if out, err := h.env.Exec("scontrol", "update", "nodename="+n2, "state=drain", "reason="+why); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		h.waitMirror(n2, func(m mirror) bool {
			return m.podReason == why && m.nodeReason == why && m.podCond == "False/Drained" && strings.Contains(m.nodeState, "drain")
		}, "the person's drain mirrored")
		h.cordon(k8sNode(1), true, "")
		h.setPodReady(n2, false)
		h.cordon(k8sNode(1), false, "")
		h.setPodReady(n2, true)
		// Level-triggered: wait until the syncer has seen the last change (pod Ready again)
		// and check the person's reason is intact.
		before := h.corrections(syncer.DirectionToSlurm)
		h.waitMirror(n2, func(m mirror) bool { return m.podReason == why }, "reason kept")
		h.waitSlurm(n2, drainedWith(why), "still drained by alice")
		if after := h.corrections(syncer.DirectionToSlurm); after != before {
			t.Errorf("the syncer changed Slurm %v times while a person's drain was on", after-before)
		}
		if out, err := h.env.Exec("scontrol", "update", "nodename="+n2, "state=resume"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		h.waitMirror(n2, func(m mirror) bool { return m.podCond == "True/Idle" }, "available")
	})

	step("pod not Ready and node NotReady are causes", func(t *testing.T) {
		h.setPodReady(n2, false)
		h.setNodeReady(k8sNode(1), false)
		h.waitSlurm(n2, drainedWith("k8s: node NotReady; pod not Ready"), "drained with both causes")
		h.setNodeReady(k8sNode(1), true)
		h.waitSlurm(n2, drainedWith("k8s: pod not Ready"), "the reason follows the causes")
		h.setPodReady(n2, true)
		h.waitSlurm(n2, notDrained, "resumed")
	})

	step("a pod that has not been Ready since its container started is not drained", func(t *testing.T) {
		// n3's container restarts and its readiness probe keeps failing (slurmd waiting for
		// a slow slurmctld, say): startup, however long, is no cause.
		before := h.corrections(syncer.DirectionToSlurm)
		now := time.Now().Truncate(time.Second)
		h.startContainer(n3, now.Add(-2*time.Second), now)
		h.watchNotDrained(n3, time.Now().Add(notReadyGrace+4*poll))
		if after := h.corrections(syncer.DirectionToSlurm); after != before {
			t.Errorf("the syncer changed Slurm %v times for a starting pod", after-before)
		}
		h.setPodReady(n3, true)
	})

	step("a Ready pod that turns not Ready is drained once the grace is over", func(t *testing.T) {
		since := h.setPodReady(n1, false)
		// Slurm's node must stay undrained for the whole grace, counted from the transition
		// time kubelet (here, the test) wrote.
		h.watchNotDrained(n1, since.Add(notReadyGrace))
		h.waitSlurm(n1, drainedWith("k8s: pod not Ready"), "drained after the grace")
		// n1 stays drained for the next step.
	})

	step("the drain budget: one node of three per cause; cordons are exempt", func(t *testing.T) {
		// 10% of 3 nodes rounds down to 0: the budget is 1 node, and n1 holds it.
		heldBefore := h.held()
		since := h.setPodReady(n2, false)
		eventually(t, notReadyGrace+15*time.Second, func() error {
			if got := h.held() - heldBefore; got != 1 {
				return fmt.Errorf("%v drains held, want 1", got)
			}
			return nil
		})
		if time.Now().Before(since.Add(notReadyGrace)) {
			t.Errorf("held before the grace was over")
		}
		if st, r, err := h.slurmNode(n2); err != nil || strings.Contains(st, "DRAIN") {
			t.Fatalf("n2 drained past the budget: %s %q %v", st, r, err)
		}
		if !h.events.has(sunkv1.ReasonDrainHeld, n2) {
			t.Errorf("no %s event for %s; events: %v", sunkv1.ReasonDrainHeld, n2, h.events.all())
		}
		// A cordon is a person's request: drained whatever the budget.
		h.cordon(k8sNode(2), true, "budget test")
		h.waitSlurm(n3, drainedWith("k8s: node cordoned (budget test)"), "drained by the cordon")
		// n1 Ready again: resumed, and the held drain of n2 goes ahead.
		h.setPodReady(n1, true)
		h.waitSlurm(n1, notDrained, "resumed")
		h.waitSlurm(n2, drainedWith("k8s: pod not Ready"), "drained once the budget had room")
		if got := h.held() - heldBefore; got != 1 {
			t.Errorf("%v holds counted, want 1 (once per hold, not per retry)", got)
		}
		h.cordon(k8sNode(2), false, "")
		h.setPodReady(n2, true)
		h.waitSlurm(n2, notDrained, "resumed")
		h.waitSlurm(n3, notDrained, "resumed")
	})

	step("restart mid-way: correct end state, no flapping", func(t *testing.T) {
		h.cordon(k8sNode(2), true, "restart test")
		h.waitSlurm(n3, drainedWith("k8s: node cordoned (restart test)"), "drained")
		h.stop()
		// While no syncer runs: the cordon on n3 persists, n1 is cordoned.
		h.cordon(k8sNode(0), true, "while down")
		h.newMetrics()
		h.start()
		h.waitSlurm(n1, drainedWith("k8s: node cordoned (while down)"), "drained after the restart")
		// The drain of n3 was already right: the new syncer must not touch it. Watch it for
		// a few polls: always drained with the same reason.
		deadline := time.Now().Add(6 * poll)
		for time.Now().Before(deadline) {
			if st, r, err := h.slurmNode(n3); err != nil || !drainedWith("k8s: node cordoned (restart test)")(st, r) {
				t.Fatalf("n3 flapped after the restart: %s %q %v", st, r, err)
			}
		}
		if got := h.corrections(syncer.DirectionToSlurm); got != 1 {
			t.Errorf("the restarted syncer made %v Slurm changes, want 1 (drain n1)", got)
		}
		h.cordon(k8sNode(0), false, "")
		h.cordon(k8sNode(2), false, "")
		h.waitSlurm(n1, notDrained, "resumed")
		h.waitSlurm(n3, notDrained, "resumed")
	})

	step("slurmrestd stopped: no changes either way, then recovery", func(t *testing.T) {
		if out, err := runHack("env-slurm.sh", "stop-restd"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		restarted := false
		defer func() {
			if !restarted {
				_, _ = runHack("env-slurm.sh", "start-restd")
			}
		}()
		eventually(t, 15*time.Second, func() error {
			if h.s.Healthy() {
				return errors.New("the syncer still reads Slurm as healthy")
			}
			return nil
		})
		if v := h.readable(); v != 0 {
			t.Errorf("slurm_state_readable = %v, want 0", v)
		}
		before, _ := h.mirror(n1)
		h.cordon(k8sNode(0), true, "during outage")
		const why = "set while restd was down"
		if out, err := h.env.Exec("scontrol", "update", "nodename="+n2, "state=drain", "reason="+why); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		// For a few polls: nothing drained in Slurm, nothing mirrored in Kubernetes.
		deadline := time.Now().Add(8 * poll)
		for time.Now().Before(deadline) {
			if st, _, err := h.slurmNode(n1); err != nil || strings.Contains(st, "DRAIN") {
				t.Fatalf("n1 changed in Slurm during the outage: %s %v", st, err)
			}
			if m, err := h.mirror(n2); err != nil || m.podReason == why {
				t.Fatalf("n2's pod changed during the outage: %+v %v", m, err)
			}
		}
		if after, _ := h.mirror(n1); after.podState != before.podState || after.podCond != before.podCond {
			t.Errorf("n1's mirror changed during the outage: %+v -> %+v", before, after)
		}
		if out, err := runHack("env-slurm.sh", "start-restd"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		restarted = true
		h.waitSlurm(n1, drainedWith("k8s: node cordoned (during outage)"), "drained after recovery")
		h.waitMirror(n2, func(m mirror) bool { return m.podReason == why }, "mirrored after recovery")
		eventually(t, 5*time.Second, func() error {
			if v := h.readable(); v != 1 {
				return fmt.Errorf("slurm_state_readable = %v, want 1", v)
			}
			return nil
		})
		h.cordon(k8sNode(0), false, "")
		if out, err := h.env.Exec("scontrol", "update", "nodename="+n2, "state=resume"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		h.waitSlurm(n1, notDrained, "resumed")
	})

	step("two compute pods on one node: the pods keep the mirror, the node only the cluster label", func(t *testing.T) {
		ctx := context.Background()
		extra := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slurm-extra", Labels: map[string]string{
				wellknown.LabelCluster: clusterName, wellknown.LabelComponent: wellknown.ComponentCompute, wellknown.LabelNodeSet: "gpu"}},
			Spec: corev1.PodSpec{NodeName: k8sNode(0), Containers: []corev1.Container{{Name: "slurmd", Image: "sunk.dev/slurm:24.11-local"}}},
		}
		if err := h.c.Create(ctx, extra); err != nil {
			t.Fatal(err)
		}
		shared := func(m mirror) bool {
			return m.podState == "idle" && m.nodeState == "" && m.nodeCond == "" &&
				m.nodeLabels[wellknown.LabelCluster] == clusterName && m.nodeLabels[wellknown.LabelSlurmNode] == ""
		}
		h.waitMirror(n1, shared, "node unmirrored, pod mirrored")
		// And it stays so: no writer takes the node back for its own Slurm node.
		deadline := time.Now().Add(6 * poll)
		for time.Now().Before(deadline) {
			if m, err := h.mirror(n1); err != nil || !shared(m) {
				t.Fatalf("the shared node was mirrored again: %+v %v", m, err)
			}
		}
		// Grace period 0: what kubelet sends once the pod's containers stopped (no kubelet here).
		if err := h.c.Delete(ctx, extra, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		h.waitMirror(n1, func(m mirror) bool {
			return m.nodeState == "idle" && m.nodeCond == "True/Idle" && m.nodeLabels[wellknown.LabelSlurmNode] == n1
		}, "the node mirrors its one pod's Slurm node again")
	})

	step("a compute pod of another cluster on the node: shared too, and its cluster's label kept", func(t *testing.T) {
		ctx := context.Background()
		other := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-compute-0", Labels: map[string]string{
				wellknown.LabelCluster: "other", wellknown.LabelComponent: wellknown.ComponentCompute, wellknown.LabelNodeSet: "cpu"}},
			Spec: corev1.PodSpec{NodeName: k8sNode(0), Containers: []corev1.Container{{Name: "slurmd", Image: "sunk.dev/slurm:24.11-local"}}},
		}
		if err := h.c.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		labelled := func(cluster string) func(m mirror) bool {
			return func(m mirror) bool {
				return m.podState == "idle" && m.nodeState == "" && m.nodeCond == "" &&
					m.nodeLabels[wellknown.LabelCluster] == cluster && m.nodeLabels[wellknown.LabelSlurmNode] == ""
			}
		}
		h.waitMirror(n1, labelled(clusterName), "node unmirrored beside the other cluster's pod")
		// Had the other cluster's syncer labelled the node first, this one leaves its label:
		// each setting its own in turn rewrote the Node every resync.
		h.updateNode(k8sNode(0), func(n *corev1.Node) { n.Labels[wellknown.LabelCluster] = "other" })
		deadline := time.Now().Add(6 * poll)
		for time.Now().Before(deadline) {
			if m, err := h.mirror(n1); err != nil || !labelled("other")(m) {
				t.Fatalf("the node shared with another cluster was relabelled or mirrored: %+v %v", m, err)
			}
		}
		// The other cluster's pod goes, and its syncer takes its label off (played here).
		if err := h.c.Delete(ctx, other, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		h.updateNode(k8sNode(0), func(n *corev1.Node) { delete(n.Labels, wellknown.LabelCluster) })
		h.waitMirror(n1, func(m mirror) bool {
			return m.nodeState == "idle" && m.nodeCond == "True/Idle" && m.nodeLabels[wellknown.LabelSlurmNode] == n1 &&
				m.nodeLabels[wellknown.LabelCluster] == clusterName
		}, "the node mirrors its one pod's Slurm node again")
	})

	step("a pod of another namespace labelled as a compute pod is not one until a NodeSet controls it", func(t *testing.T) {
		ctx := context.Background()
		if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}); err != nil {
			t.Fatal(err)
		}
		// Anyone who may create pods may name a node and set labels: the pod does not make the
		// node shared, and the node keeps its Slurm node's mirror.
		intruder := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "intruder", Labels: map[string]string{
				wellknown.LabelCluster: clusterName, wellknown.LabelComponent: wellknown.ComponentCompute, wellknown.LabelNodeSet: "gpu"}},
			Spec: corev1.PodSpec{NodeName: k8sNode(0), Containers: []corev1.Container{{Name: "slurmd", Image: "sunk.dev/slurm:24.11-local"}}},
		}
		mirrored := func(m mirror) bool {
			return m.nodeState == "idle" && m.nodeCond == "True/Idle" && m.nodeLabels[wellknown.LabelSlurmNode] == n1
		}
		h.waitMirror(n1, mirrored, "the node mirrors its Slurm node")
		if err := h.c.Create(ctx, intruder); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(6 * poll)
		for time.Now().Before(deadline) {
			if m, err := h.mirror(n1); err != nil || !mirrored(m) {
				t.Fatalf("a labelled pod of another namespace took the node's mirror off: %+v %v", m, err)
			}
		}
		// Controlled by a NodeSet (another cluster's, in its own namespace): the node is shared.
		intruder.OwnerReferences = []metav1.OwnerReference{{APIVersion: sunkv1.GroupVersion.String(), Kind: "NodeSet",
			Name: "gpu", UID: "nodeset-uid", Controller: ptr.To(true)}}
		if err := h.c.Update(ctx, intruder); err != nil {
			t.Fatal(err)
		}
		h.waitMirror(n1, func(m mirror) bool { return m.nodeCond == "" && m.nodeLabels[wellknown.LabelSlurmNode] == "" },
			"node unmirrored beside a NodeSet's pod of another namespace")
		if err := h.c.Delete(ctx, intruder, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		h.waitMirror(n1, mirrored, "the node mirrors its one pod's Slurm node again")
	})

	step("pod deleted: drained, then the record is removed", func(t *testing.T) {
		ctx := context.Background()
		p := &corev1.Pod{}
		if err := h.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: n3}, p); err != nil {
			t.Fatal(err)
		}
		p.Finalizers = append(p.Finalizers, holdPod) // as the NodeSet controller's finalizer would
		if err := h.c.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		// Grace 0 stands in for kubelet confirming the containers stopped (there is none).
		if err := h.c.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		h.waitSlurm(n3, drainedWith("k8s: pod being deleted"), "drained while the pod goes")
		eventually(t, 10*time.Second, func() error {
			if err := h.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: n3}, p); err != nil {
				return err
			}
			p.Finalizers = nil
			return h.c.Update(ctx, p)
		})
		eventually(t, 20*time.Second, func() error {
			if _, err := h.sl.GetNode(ctx, n3); !errors.Is(err, slurm.ErrNotFound) {
				return fmt.Errorf("Slurm node %s still there (%v)", n3, err)
			}
			return nil
		})
		// The node's labels and condition go with its last compute pod.
		eventually(t, 10*time.Second, func() error {
			n := &corev1.Node{}
			if err := h.c.Get(ctx, types.NamespacedName{Name: k8sNode(2)}, n); err != nil {
				return err
			}
			for _, c := range n.Status.Conditions {
				if c.Type == wellknown.ConditionSlurmNode {
					return errors.New("the node still has the Slurm condition")
				}
			}
			if _, ok := n.Labels[wellknown.LabelCluster]; ok {
				return errors.New("the node still has the cluster label")
			}
			return nil
		})
		// Other nodes keep their records: only a pod-less record is removed.
		for _, name := range []string{n1, n2} {
			if _, err := h.sl.GetNode(ctx, name); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})

	step("a record the NodeSet autoscaler parked stays without a pod; another pod-less one goes", func(t *testing.T) {
		ctx := context.Background()
		// Both are the syncer's (dynamic, the test bed's feature); only parked carries the comment.
		const parked, orphan = "gpu-90", "gpu-91"
		// Slurm creates a record without a comment, so parked gets the feature (which makes it
		// the syncer's) and the comment in one update, and comes first.
		if out, err := h.env.Exec("scontrol", "create", "NodeName="+parked, "State=FUTURE", "CPUs=1"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		t.Cleanup(func() { _, _ = h.env.Exec("scontrol", "delete", "NodeName="+parked+","+orphan) })
		if out, err := h.env.Exec("scontrol", "update", "NodeName="+parked, "AvailableFeatures="+testFeature, "ActiveFeatures="+testFeature, "Comment="+wellknown.ParkedPrefix+"abc"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if out, err := h.env.Exec("scontrol", "create", "NodeName="+orphan, "State=FUTURE", "CPUs=1", "Features="+testFeature); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		eventually(t, 30*time.Second, func() error {
			if _, err := h.sl.GetNode(ctx, orphan); !errors.Is(err, slurm.ErrNotFound) {
				return fmt.Errorf("the pod-less record %s is still there (%v)", orphan, err)
			}
			return nil
		})
		// The syncer removed the later one after its grace: the parked one's was over before.
		if n, err := h.sl.GetNode(ctx, parked); err != nil || !wellknown.Parked(n.BaseState(), n.Comment) {
			t.Fatalf("the parked record %s: %+v %v", parked, n, err)
		}
	})

	step("a pod going from a parked record: the record is not drained", func(t *testing.T) {
		// The NodeSet parks a record before its pod's finalizer goes; a drain for the pod going
		// would stick to the FUTURE record (Slurm 26.05 then refuses to park it again).
		ctx := context.Background()
		comment := wellknown.ParkedPrefix + "abc"
		if err := h.sl.UpdateNode(ctx, n2, slurm.NodeUpdate{State: slurm.NodeStateFuture, Comment: &comment}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.sl.DeleteNode(context.Background(), n2) }) // restoreTestBed registers it again
		p := &corev1.Pod{}
		if err := h.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: n2}, p); err != nil {
			t.Fatal(err)
		}
		p.Finalizers = append(p.Finalizers, holdPod)
		if err := h.c.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			eventually(t, 10*time.Second, func() error {
				q := &corev1.Pod{}
				if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: n2}, q); apierrors.IsNotFound(err) {
					return nil
				} else if err != nil {
					return err
				}
				q.Finalizers = nil
				return h.c.Update(context.Background(), q)
			})
		})
		if err := h.c.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		// The syncer has seen the pod going with the parked record: it mirrored the record.
		h.waitMirror(n2, func(m mirror) bool { return m.podState == "future" }, "the parked state on the going pod")
		// For a few more polls (scontrol does not show FUTURE nodes: read it over REST).
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(poll) {
			if n, err := h.sl.GetNode(ctx, n2); err != nil || n.HasState("DRAIN") || !wellknown.Parked(n.BaseState(), n.Comment) {
				t.Fatalf("the parked record while its pod goes: %+v %v", n, err)
			}
		}
	})
}

// watchNotDrained checks the Slurm node until the deadline: never drained.
func (h *harness) watchNotDrained(name string, deadline time.Time) {
	h.t.Helper()
	for {
		st, r, err := h.slurmNode(name)
		if !time.Now().Before(deadline) {
			return // this answer may be from after the deadline
		}
		if err != nil || strings.Contains(st, "DRAIN") {
			h.t.Fatalf("%s drained before %s: %s %q %v", name, deadline.Format(time.TimeOnly), st, r, err)
		}
	}
}

func (h *harness) held() float64 {
	return sumMetric(h.reg, "sunk_syncer_drains_held_total", "cause", syncer.CausePodNotReady)
}

// recorder keeps the syncer's events: "<reason> <object name>: <note>".
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(regarding, _ runtime.Object, _, reason, _, note string, args ...any) {
	name := ""
	if o, ok := regarding.(client.Object); ok {
		name = o.GetName()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, reason+" "+name+": "+fmt.Sprintf(note, args...))
}

func (r *recorder) has(reason, name string) bool {
	for _, e := range r.all() {
		if strings.HasPrefix(e, reason+" "+name+":") {
			return true
		}
	}
	return false
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (h *harness) corrections(direction string) float64 {
	return sumMetric(h.reg, "sunk_syncer_drift_corrected_total", "direction", direction)
}

func (h *harness) readable() float64 {
	return sumMetric(h.reg, "sunk_syncer_slurm_state_readable", "", "")
}

// sumMetric sums a metric family's series, those with label k=v when k is set.
func sumMetric(reg *prometheus.Registry, name, k, v string) float64 {
	return testenv.SumMetric(reg, name, k, v)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// eventually polls f until it returns nil or the deadline passes.
func eventually(tb testing.TB, d time.Duration, f func() error) {
	pollEvery(tb, d, 100*time.Millisecond, f)
}

func pollEvery(tb testing.TB, d, every time.Duration, f func() error) {
	tb.Helper()
	wait.For(tb, "", d, every, f)
}

func runHack(script string, args ...string) (string, error) {
	return testenv.Hack(script, args...)
}
