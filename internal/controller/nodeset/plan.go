package nodeset

import (
	"sort"

	"sunk.dev/sunk/internal/kube"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// actionKind is what the reconciler does for one member.
type actionKind int

const (
	// actCreate creates the member's pod.
	actCreate actionKind = iota
	// actRetire takes the member's pod away the protected way: drain the Slurm node, and
	// delete the pod once Slurm says it is drained and runs no job.
	actRetire
	// actResume lifts the NodeSet's own drain of a member whose pod is current and Ready.
	actResume
	// actRelease removes the finalizer of a stopped pod, after removing its Slurm node record
	// (kept only for a replacement whose node someone else drained).
	actRelease
	// actHold records a desired member whose pod may not be created yet (gpuConfigWait).
	actHold
)

type action struct {
	kind   actionKind
	m      *member
	reason string // actRetire: the drain reason
}

// planInput is a snapshot of one NodeSet's members in both worlds.
type planInput struct {
	members []*member // every member: desired ones and those with a pod
	// outdated reports pods to replace: an older template, or placed where the selection
	// no longer allows.
	outdated func(m *member) bool
	strategy sunkv1.NodeSetUpdateStrategyType
	// maxUnavailable bounds the rolling update (at least 1).
	maxUnavailable int
	// slurmKnown: the Slurm node list was read. Without it the plan comes from Kubernetes
	// alone; every action it plans that touches Slurm (retire, release) reads the node afresh
	// and stops on an error, so nothing is drained, deleted or removed on a guess.
	slurmKnown bool
	// holdCreates: no pod may be created yet (gpuConfigWait); the members that would get one
	// are held, and count against maxUnavailable as missing pods do.
	holdCreates bool
}

// plan decides, from a snapshot alone, what to do for each member. The reconciler carries
// the actions out and re-reads Slurm before any pod deletion: plan never deletes by itself.
//
//   - a desired member without a pod gets one, or is held while creates are held;
//   - a stopped terminating pod is released (its Slurm record removed first);
//   - a pod that is no longer desired (scale-in, node left the selection) is retired;
//   - a current, Ready pod whose Slurm node carries the NodeSet's own drain is resumed (a
//     scale-in or update undone before its pod went);
//   - with RollingUpdate, outdated pods are retired: those already unavailable at once, the
//     others (busy ones included, even when not Ready) idle-first within maxUnavailable; with
//     OnDelete they are left alone.
func plan(in planInput) []action {
	var out []action
	var candidates []*member
	unavailable := 0
	for _, m := range in.members {
		p := m.pod
		switch {
		case p == nil:
			if m.desired && !m.taken {
				kind := actCreate
				if in.holdCreates {
					kind = actHold
				}
				out = append(out, action{kind: kind, m: m})
				unavailable++
			}
			continue
		case terminating(p):
			if m.desired {
				unavailable++
			}
			if stopped(p) && hasFinalizer(p) {
				out = append(out, action{kind: actRelease, m: m})
			}
			continue
		case !m.desired:
			out = append(out, action{kind: actRetire, m: m, reason: drainReason(m.why)})
			continue
		}
		if takenAway(m, in.slurmKnown) {
			unavailable++
		}
		if in.outdated(m) {
			candidates = append(candidates, m)
		} else if in.slurmKnown && kube.PodReady(p) && ourDrain(m.slurm) {
			out = append(out, action{kind: actResume, m: m})
		}
	}
	if in.strategy == sunkv1.OnDeleteNodeSetStrategy || !in.slurmKnown || len(candidates) == 0 {
		return out
	}
	// Outdated members that take no jobs already cost nothing to replace; the others go
	// idle first, within what is left of maxUnavailable.
	var fresh []*member
	for _, m := range candidates {
		// A busy member stays in line even when its pod is briefly not Ready (slurmd's
		// probe fails while slurmctld reconfigures after a record is removed): it would
		// otherwise be drained before idle members and hold the update until its job ends.
		// One the update already drained goes on being retired: it already counts against
		// the budget, and it goes when its jobs end.
		free := (!kube.PodReady(m.pod) || m.slurm == nil || m.slurm.Drained()) && (m.slurm == nil || !m.slurm.Busy())
		if free || ourDrain(m.slurm) {
			out = append(out, action{kind: actRetire, m: m, reason: drainReason(whyUpdate)})
		} else {
			fresh = append(fresh, m)
		}
	}
	sort.SliceStable(fresh, func(i, j int) bool {
		bi, bj := fresh[i].slurm.Busy(), fresh[j].slurm.Busy()
		if bi != bj {
			return !bi
		}
		return fresh[i].name < fresh[j].name
	})
	for _, m := range fresh {
		if unavailable >= in.maxUnavailable {
			break
		}
		out = append(out, action{kind: actRetire, m: m, reason: drainReason(whyUpdate)})
		unavailable++
	}
	return out
}

// takenAway reports a desired member that counts against maxUnavailable: its pod is not
// Ready, Slurm has no record of it yet (a compute pod is Ready once its slurmd runs, a moment
// before slurmd registers), or the NodeSet controller drained its Slurm node (or, with Slurm
// unknown, might have). Drains by people or other components do not count: they would stall
// the update.
func takenAway(m *member, slurmKnown bool) bool {
	return !kube.PodReady(m.pod) || !slurmKnown || m.slurm == nil || ourDrain(m.slurm)
}
