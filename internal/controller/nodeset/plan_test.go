package nodeset

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

const current = "new"

type podOpt func(*corev1.Pod)

func withHash(h string) podOpt {
	return func(p *corev1.Pod) { p.Labels[wellknown.LabelTemplateHash] = h }
}
func notReady(p *corev1.Pod) { p.Status.Conditions = nil }
func deleting(grace int64) podOpt {
	return func(p *corev1.Pod) {
		now := metav1.Now()
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	}
}

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.LabelTemplateHash: current}, Finalizers: []string{wellknown.FinalizerSlurmNode}},
		Spec:       corev1.PodSpec{NodeName: "k8s-node"},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func snode(name string, state ...string) *slurm.Node {
	return &slurm.Node{Name: name, State: state}
}

func drained(n *slurm.Node, reason string) *slurm.Node {
	n.State = append(n.State, "DRAIN")
	n.Reason = reason
	return n
}

func input(members ...*member) planInput {
	return planInput{
		members:        members,
		outdated:       func(m *member) bool { return m.pod.Labels[wellknown.LabelTemplateHash] != current },
		strategy:       sunkv1.RollingUpdateNodeSetStrategy,
		maxUnavailable: 1,
		slurmKnown:     true,
	}
}

// summary renders actions as "kind:name" in plan order.
func summary(actions []action) []string {
	var out []string
	for _, a := range actions {
		k := map[actionKind]string{actCreate: "create", actRetire: "retire", actResume: "resume", actRelease: "release", actHold: "hold"}[a.kind]
		out = append(out, k+":"+a.m.name)
	}
	return out
}

func expect(t *testing.T, what string, got []action, want ...string) {
	t.Helper()
	if s := summary(got); !slices.Equal(s, want) {
		t.Errorf("%s: got %v, want %v", what, s, want)
	}
}

func TestPlanCreatesAndScalesIn(t *testing.T) {
	in := input(
		&member{name: "n-0", desired: true},
		&member{name: "n-1", desired: true, taken: true},
		&member{name: "n-2", desired: true, pod: pod("n-2"), slurm: snode("n-2", "IDLE")},
		&member{name: "n-3", why: whyScaleIn, pod: pod("n-3"), slurm: snode("n-3", "ALLOCATED")},
		&member{name: "n-4", why: whyScaleIn, pod: pod("n-4"), slurm: snode("n-4", "IDLE")},
	)
	got := plan(in)
	expect(t, "create missing, retire every surplus pod whatever the budget", got, "create:n-0", "retire:n-3", "retire:n-4")
	if got[1].reason != "k8s: nodeset scale-in" {
		t.Errorf("drain reason %q", got[1].reason)
	}
	// Without Slurm the surplus pods are still handed to retire, which decides on a fresh read.
	in.slurmKnown = false
	expect(t, "Slurm unknown", plan(in), "create:n-0", "retire:n-3", "retire:n-4")
	// Held creates (a GPU NodeSet before slurmctld has the device Include) hold nothing else.
	in.slurmKnown, in.holdCreates = true, true
	expect(t, "creates held", plan(in), "hold:n-0", "retire:n-3", "retire:n-4")
}

func TestPlanRollingUpdateIdleFirstWithinBudget(t *testing.T) {
	old := withHash("old")
	members := func() []*member {
		return []*member{
			{name: "n-0", desired: true, pod: pod("n-0", old), slurm: snode("n-0", "ALLOCATED")},
			{name: "n-1", desired: true, pod: pod("n-1", old), slurm: snode("n-1", "IDLE")},
			{name: "n-2", desired: true, pod: pod("n-2", old), slurm: snode("n-2", "MIXED")},
			{name: "n-3", desired: true, pod: pod("n-3", old), slurm: snode("n-3", "IDLE")},
		}
	}
	expect(t, "maxUnavailable 1", plan(input(members()...)), "retire:n-1")

	in := input(members()...)
	in.maxUnavailable = 3
	expect(t, "maxUnavailable 3: idle ones, then busy by name", plan(in), "retire:n-1", "retire:n-3", "retire:n-0")

	// n-1 is being replaced (its pod terminating): no budget left for another.
	m := members()
	m[1].pod = pod("n-1", old, deleting(30))
	expect(t, "one already unavailable", plan(input(m...)))

	// The replacement is up, current and Ready, still drained by the update: resume it, but
	// it still counts until Slurm says otherwise.
	m[1].pod, m[1].slurm = pod("n-1"), drained(snode("n-1", "IDLE"), "k8s: nodeset update")
	expect(t, "resume the replaced node", plan(input(m...)), "resume:n-1")
	m[1].slurm = nil
	expect(t, "a Ready replacement that has not registered yet still counts", plan(input(m...)))
	m[1].slurm = snode("n-1", "IDLE")
	expect(t, "then the next idle one", plan(input(m...)), "retire:n-3")

	// A human's drain is never lifted, and does not use up the budget.
	m[1].slurm = drained(snode("n-1", "IDLE"), "bad DIMM")
	expect(t, "human drain", plan(input(m...)), "retire:n-3")

	// Outdated pods that take no jobs anyway are replaced without budget; a busy one whose
	// pod is briefly not Ready stays in line (and its unreadiness uses the budget).
	m = members()
	m[2].pod = pod("n-2", old, notReady)
	m[3].slurm = drained(snode("n-3", "IDLE"), "bad DIMM")
	expect(t, "unavailable idle ones first, free; a not-Ready busy one waits its turn", plan(input(m...)), "retire:n-3")
	m[2].slurm = snode("n-2", "IDLE")
	expect(t, "a not-Ready idle one is free", plan(input(m...)), "retire:n-2", "retire:n-3")

	in = input(members()...)
	in.strategy = sunkv1.OnDeleteNodeSetStrategy
	expect(t, "OnDelete", plan(in))
	in = input(members()...)
	in.slurmKnown = false
	expect(t, "Slurm unknown: no update step", plan(in))
}

func TestPlanReleasesStoppedPods(t *testing.T) {
	unscheduled := pod("n-2", deleting(30))
	unscheduled.Spec.NodeName = ""
	noFinalizer := pod("n-3", deleting(0))
	noFinalizer.Finalizers = nil
	in := input(
		&member{name: "n-0", why: whyScaleIn, pod: pod("n-0", deleting(0))},
		&member{name: "n-1", desired: true, pod: pod("n-1", deleting(30))},
		&member{name: "n-2", desired: true, pod: unscheduled},
		&member{name: "n-3", why: whyScaleIn, pod: noFinalizer},
	)
	expect(t, "kubelet confirmed, or never ran", plan(in), "release:n-0", "release:n-2")
}

func TestMaxUnavailable(t *testing.T) {
	for _, c := range []struct {
		v       *intstr.IntOrString
		desired int
		want    int
	}{
		{nil, 10, 1}, {ptr.To(intstr.FromInt32(3)), 10, 3}, {ptr.To(intstr.FromString("25%")), 10, 2},
		{ptr.To(intstr.FromString("5%")), 10, 1}, {ptr.To(intstr.FromInt32(0)), 10, 1}, {ptr.To(intstr.FromString("x")), 10, 1},
	} {
		ns := &sunkv1.NodeSet{}
		ns.Spec.UpdateStrategy.RollingUpdate = &sunkv1.RollingUpdateNodeSet{MaxUnavailable: c.v}
		if got := maxUnavailable(ns, c.desired); got != c.want {
			t.Errorf("maxUnavailable(%v of %d) = %d, want %d", c.v, c.desired, got, c.want)
		}
	}
}

func TestOurDrain(t *testing.T) {
	for _, c := range []struct {
		n    *slurm.Node
		want bool
	}{
		{drained(snode("x", "IDLE"), "k8s: nodeset update"), true},
		{drained(snode("x", "IDLE"), "k8s: pod not ready"), false},
		{drained(snode("x", "IDLE"), "maintenance"), false},
		{&slurm.Node{State: []string{"IDLE"}, Reason: "k8s: nodeset update"}, false},
		{nil, false},
	} {
		if got := ourDrain(c.n); got != c.want {
			t.Errorf("ourDrain(%v) = %v", fmt.Sprint(c.n), got)
		}
	}
}
