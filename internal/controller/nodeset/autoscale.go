// Autoscaling (spec.autoscaling): Slurm's queue sizes a NodeSet, in either mode. Slurm keeps a
// record of every member up to maxReplicas, those without a pod parked in state FUTURE, so that
// its own scheduler accepts and plans jobs for nodes that do not run yet; the operator reads
// the jobs that pend in the NodeSet's partitions and writes spec.replicas, as a
// HorizontalPodAutoscaler writes a scale subresource. Members are taken in memberOrder's order
// (ordinals; in PerNode mode nodes with a pod first, then by node name), shrinking goes through
// the same drain-then-delete path as any scale-in, and only ever takes the last members once
// they are idle: a PerNode NodeSet gives its idle nodes back to Kubernetes.

package nodeset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// scaleNode is what the autoscaler knows of the NodeSet's member at one position of its
// memberOrder.
type scaleNode struct {
	name   string
	record *slurm.Node // nil: Slurm has no record of it
	// pod is when the member's pod was created; zero without a pod.
	pod time.Time
}

// scaleInput is a snapshot for decideReplicas.
type scaleInput struct {
	replicas int32
	bounds   sunkv1.NodeSetAutoscaling
	nodes    []scaleNode // positions 0 .. max(replicas, maxReplicas)-1, fewer when bounded
	// bounded: the NodeSet has no members past the last of nodes when nodes lists fewer than
	// max(replicas, maxReplicas) (PerNode: one per node it may run on), so it grows to no more
	// than them, whatever maxReplicas says.
	bounded      bool
	pendingJobs  int32
	pendingNodes int32
	now          time.Time
}

// decideReplicas is the autoscaler's whole rule, from a snapshot alone:
//
//   - wanted = the nodes that run jobs plus the nodes pending jobs ask for, within the bounds
//     (maxReplicas, or the members there are when fewer: bounded);
//   - every node below maxReplicas that Slurm has no record of runs once, to register its shape
//     (a job sent to it must pend, not be refused);
//   - above that, the NodeSet shrinks from its last member down, one node at a time
//     while each is idle for idleAfter (Slurm's last_busy) or, not registered yet, has had its
//     pod for that long; the first node that is not stops the shrink, so that a busy node is
//     never drained to make room.
func decideReplicas(in scaleInput) (int32, string) {
	lo, hi := in.bounds.MinReplicas, in.bounds.MaxReplicas
	if in.bounded {
		hi = min(hi, int32(len(in.nodes)))
	}
	idleAfter := in.bounds.IdleAfterOrDefault()
	busy, _ := in.count()
	wanted := min(max(busy+in.pendingNodes, lo), hi)
	target, why := wanted, fmt.Sprintf("%d busy, %d pending job(s) ask for %d node(s)", busy, in.pendingJobs, in.pendingNodes)
	var unknown []string
	for i := 0; i < int(hi) && i < len(in.nodes); i++ {
		if in.nodes[i].record == nil {
			unknown = append(unknown, in.nodes[i].name)
			target = max(target, int32(i)+1)
		}
	}
	if len(unknown) > 0 {
		why += "; Slurm has no record of " + list(unknown) + ": started once to register"
	}
	keep := in.replicas
	var idle []string
	for i := in.replicas - 1; i >= target; i-- {
		if int(i) < len(in.nodes) && i < hi && !goes(in.nodes[i], in.now, idleAfter) {
			break
		}
		keep = i
		if int(i) < len(in.nodes) {
			idle = append(idle, in.nodes[i].name)
		}
	}
	next := max(target, keep)
	if next < in.replicas {
		slices.Reverse(idle)
		why += fmt.Sprintf("; %s idle for %s", list(idle), idleAfter)
	}
	return next, why
}

// count is how many of the NodeSet's members run jobs (busy) and how many have a pod and a
// record that runs none (idle); a parked (FUTURE) record is neither.
func (in scaleInput) count() (busy, idle int32) {
	for i := 0; i < int(in.replicas) && i < len(in.nodes); i++ {
		switch r := in.nodes[i].record; {
		case r == nil || r.BaseState() == string(slurm.NodeStateFuture):
		case r.Busy():
			busy++
		case !in.nodes[i].pod.IsZero():
			idle++
		}
	}
	return busy, idle
}

// goes reports whether a member above what is wanted may go: parked or pod-less, idle for
// idleAfter, or started that long ago without registering.
func goes(n scaleNode, now time.Time, idleAfter time.Duration) bool {
	r := n.record
	switch {
	case n.pod.IsZero():
		return r == nil || !r.Busy()
	case r == nil || r.BaseState() == string(slurm.NodeStateFuture):
		return now.Sub(n.pod) >= idleAfter
	case r.Busy():
		return false
	}
	return !r.LastBusy.IsZero() && now.Sub(r.LastBusy) >= idleAfter
}

// autoscale is step 2d: with spec.autoscaling, it reads Slurm's nodes (the process's one table
// of the cluster, slurmconn.Pool.Nodes) and its queue (the pool's job cache,
// slurmconn.Pool.Jobs), writes the replicas decideReplicas returns into spec.replicas (in
// memory too, for the members step), and removes parked records the NodeSet no longer wants
// (no candidate any more, at or above maxReplicas, of an older template, or all of them once
// autoscaling is off or the NodeSet is deleted), each after one fresh read of it (unpark). On
// any Slurm error it changes nothing.
//
// The table is what the rest of the reconcile reads (readSlurm uses this one): through node
// watchers it costs slurmrestd nothing and lags Slurm by one watcher poll (200 ms); without, it
// is read with update_time, one small request while nothing changed and as fresh as a whole
// list. Either way an autoscaled NodeSet's steady state does not grow with the node count, as
// a whole GET /nodes/ at every reconcile (12 MB and about a second of slurmctld and
// slurmrestd at 5,000 nodes, every 5 s) did. A table a poll old is safe because nothing
// removes a node on the autoscaler's word alone:
//   - a lower spec.replicas deletes no pod: the members step retires each member beyond it
//     (retire), which reads the node afresh, drains it, reads it again and deletes the pod only
//     once Slurm says it is drained and runs no job. A node the table shows idle that has just
//     been given a job is drained, keeps its job to the end and goes only then; if the demand
//     comes back before, the member is desired again and its drain lifted (actResume). A whole
//     list was no fresher by the time the drain reached slurmctld: at 5,000 nodes it takes
//     about a second to make and read, five poll intervals of the watchers;
//   - unpark removes a parked record, and park parks one, only after one read of that node: a
//     record the table shows parked that a pod has taken up since is left;
//   - a busy node the table does not show busy yet, or a pending job it lags, delays a scale-up
//     by one poll; a busy node is never drained to shrink (decideReplicas), as of the table.
func (r *Reconciler) autoscale(ctx context.Context, w *world, st *status) error {
	ns := w.ns
	a := ns.Spec.Autoscaling
	scales := a != nil && ns.DeletionTimestamp.IsZero()
	if !scales {
		r.Metrics.forget(ns)
	}
	if a == nil {
		st.counts.PendingNodes = 0
	}
	if a == nil && ns.Status.Parked == 0 {
		return nil
	}
	sl, err := r.slurmClient(ctx, w.names, w.sc.Spec.RestAPI.Version)
	var nodes []slurm.Node
	if err == nil {
		// The cluster's one table (see above): fails closed, never "no nodes".
		nodes, err = r.Slurm.Nodes(ctx, w.names, w.sc.Spec.Controller.NodeWatcher, sl)
	}
	// The jobs come from the pool's one cache of the cluster's queue, polled incrementally
	// and shared by the cluster's autoscaled NodeSets: pending demand may be a poll old (a
	// pending job's reason, a full list old), which delays a scale-up or a scale-in by as
	// much and busies no node. A cache that cannot vouch for its freshness fails here like a
	// failed read of the nodes.
	var jobs []slurm.Job
	if err == nil && scales {
		jobs, err = r.Slurm.Jobs(ctx, w.names)
	}
	if err != nil {
		// SlurmReachable turns False (once, with its event): the autoscaler changes nothing.
		w.autoscaleErr = fmt.Errorf("the autoscaler changes nothing until Slurm can be read: %w", err)
		return nil
	}
	w.slurmNodes, w.slurmNodesRead = nodes, true
	podAt := map[string]time.Time{}
	for i := range w.pods.Items {
		podAt[w.pods.Items[i].Name] = w.pods.Items[i].CreationTimestamp.Time
	}
	records := memberRecords(ns, nodes)
	if err := r.unpark(ctx, w, sl, records, podAt, st); err != nil {
		return err
	}
	if !scales {
		return nil
	}
	// A PerNode NodeSet without spec.replicas runs every candidate: the autoscaler starts there.
	in := scaleInput{replicas: w.order.running(ns.Spec.Replicas), bounds: *a, now: time.Now(), bounded: w.order.perNode}
	mine, err := r.demandFor(ctx, w, nodes, jobs)
	if err != nil {
		return err
	}
	in.pendingJobs, in.pendingNodes = mine.jobs, mine.nodes
	st.counts.PendingNodes = in.pendingNodes
	for i := range int(max(in.replicas, a.MaxReplicas)) {
		name, ok := w.order.name(i)
		if !ok {
			break
		}
		in.nodes = append(in.nodes, scaleNode{name: name, record: records[name], pod: podAt[name]})
	}
	next, why := decideReplicas(in)
	busy, idle := in.count()
	r.Metrics.observe(ns, reading{pending: in.pendingNodes, replicas: next, parked: st.counts.Parked, busy: busy, idle: idle})
	if ns.Spec.Replicas != nil && next == *ns.Spec.Replicas {
		return nil
	}
	patch := client.MergeFrom(ns.DeepCopy())
	ns.Spec.Replicas = ptr.To(next)
	if err := r.Patch(ctx, ns, patch); err != nil {
		return fmt.Errorf("writing spec.replicas %d: %w", next, err)
	}
	if next == in.replicas {
		// replicas was unset, or (PerNode) above the nodes there are: now it says what the
		// autoscaler keeps, and what runs does not change.
		return nil
	}
	reason := sunkv1.ReasonScaledUp
	if next < in.replicas {
		reason = sunkv1.ReasonScaledDown
	}
	r.Metrics.decided(ns, next > in.replicas)
	log.FromContext(ctx).Info("autoscaled", "nodeSet", ns.Name, "from", in.replicas, "to", next, "why", why)
	r.event(ns, corev1.EventTypeNormal, reason, "replicas %d → %d: %s", in.replicas, next, why)
	return nil
}

// demandFor is what the cluster's pending jobs ask this NodeSet for, once split among the
// cluster's autoscaled NodeSets (splitDemand), each with the busy nodes Slurm lists for it and,
// in PerNode mode, no more room than its candidates.
func (r *Reconciler) demandFor(ctx context.Context, w *world, nodes []slurm.Node, jobs []slurm.Job) (demand, error) {
	var list sunkv1.NodeSetList
	if err := r.List(ctx, &list, client.InNamespace(w.ns.Namespace)); err != nil {
		return demand{}, err
	}
	sets := []*sunkv1.NodeSet{w.ns} // this reconcile's copy, whatever the cache holds
	for i := range list.Items {
		if o := &list.Items[i]; o.Name != w.ns.Name && o.Spec.ClusterRef == w.ns.Spec.ClusterRef &&
			o.Spec.Autoscaling != nil && o.DeletionTimestamp.IsZero() {
			sets = append(sets, o)
		}
	}
	targets := make([]demandTarget, 0, len(sets))
	for _, o := range sets {
		var busy int32
		for _, n := range memberRecords(o, nodes) {
			if n.Busy() {
				busy++
			}
		}
		t := targetOf(w.sc, o, busy)
		if o.ModeOrDefault() == sunkv1.NodeSetPerNode {
			// Room up to the nodes it may run on, not to a maxReplicas above them: the rest
			// of a job spills into the next NodeSet instead of pending for nodes that do not
			// exist.
			n := len(w.order.candidates)
			if o != w.ns {
				var err error
				if n, err = r.perNodeCandidateCount(ctx, o, w.nodes); err != nil {
					return demand{}, err
				}
			}
			t.room = min(t.room, max(int32(n)-busy, 0))
		}
		targets = append(targets, t)
	}
	return splitDemand(jobs, targets)[w.ns.Name], nil
}

// unpark removes the parked records the NodeSet no longer wants, and counts the others. The
// records come from the cluster's node table, which may be a watcher poll behind Slurm: each
// one it would remove is read afresh first (GetNode), and left, uncounted, when it is no
// longer parked (a pod took it up and its slurmd registered) or no longer unwanted (parked
// again with the current template); a failed read leaves it, counted, for the next reconcile.
func (r *Reconciler) unpark(ctx context.Context, w *world, sl slurm.Client, records map[string]*slurm.Node, podAt map[string]time.Time, st *status) error {
	ns := w.ns
	unwanted := func(name string, n *slurm.Node) bool {
		_, hasPod := podAt[name]
		return !hasPod && (ns.Spec.Autoscaling == nil || !ns.DeletionTimestamp.IsZero() ||
			!w.order.keepsParked(name, ns.Spec.Autoscaling.MaxReplicas) || n.Comment != wellknown.ParkedPrefix+w.hash)
	}
	var parked int32
	for name, n := range records {
		if !wellknown.Parked(n.BaseState(), n.Comment) {
			continue
		}
		if !unwanted(name, n) {
			parked++
			continue
		}
		fresh, err := sl.GetNode(ctx, n.Name)
		switch {
		case errors.Is(err, slurm.ErrNotFound):
			delete(records, name) // removed meanwhile
			continue
		case err != nil:
			r.event(ns, corev1.EventTypeWarning, sunkv1.ReasonRecordNotRemoved, "reading parked Slurm node %s before removing it: %v", n.Name, err)
			parked++
			continue
		}
		records[name] = fresh
		if !wellknown.Parked(fresh.BaseState(), fresh.Comment) {
			continue // taken up since the table's read: no longer parked, and not ours to remove
		}
		if !unwanted(name, fresh) {
			parked++
			continue
		}
		err = sl.DeleteNode(ctx, n.Name)
		if err != nil && !errors.Is(err, slurm.ErrNotFound) {
			r.event(ns, corev1.EventTypeWarning, sunkv1.ReasonRecordNotRemoved, "removing parked Slurm node %s: %v", n.Name, err)
			parked++
			continue
		}
		delete(records, name)
		if err != nil {
			continue // removed meanwhile
		}
		r.event(ns, corev1.EventTypeNormal, sunkv1.ReasonRecordRemoved, "removed parked Slurm node %s: the autoscaler no longer keeps it (or it is of an older template)", n.Name)
	}
	st.counts.Parked = parked
	return nil
}

// park keeps a scaled-in member's record in Slurm, in state FUTURE with the template it
// registered with, instead of removing it: jobs may go on pending for it. Only an autoscaled
// NodeSet parks, and only candidates below maxReplicas (memberOrder.keepsParked); a record of
// an older template is removed by unpark at the next reconcile, and registered afresh.
func (r *Reconciler) park(ctx context.Context, ns *sunkv1.NodeSet, order memberOrder, sl slurm.Client, m *member) (bool, error) {
	if ns == nil || ns.Spec.Autoscaling == nil || !ns.DeletionTimestamp.IsZero() || m.desired {
		return false, nil
	}
	hash := m.pod.Labels[wellknown.LabelTemplateHash]
	if !order.keepsParked(m.name, ns.Spec.Autoscaling.MaxReplicas) || hash == "" {
		return false, nil
	}
	// Parked already: a release whose finalizer patch lost a conflict comes back here, and
	// Slurm 26.05 refuses FUTURE for a FUTURE node that carries a drain (error 2180).
	if n, err := sl.GetNode(ctx, m.name); err != nil {
		return false, err
	} else if n.BaseState() == string(slurm.NodeStateFuture) {
		return true, nil
	}
	comment := wellknown.ParkedPrefix + hash
	if err := sl.UpdateNode(ctx, m.name, slurm.NodeUpdate{State: slurm.NodeStateFuture, Comment: &comment}); err != nil {
		return false, err
	}
	r.event(ns, corev1.EventTypeNormal, sunkv1.ReasonParked, "parked Slurm node %s in state FUTURE: jobs may pend for it while it has no pod", m.name)
	return true, nil
}
