package slurmcluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// On Slurm 25.05 and later a relabelled node moves by the topology_str of a node update,
// without waiting for a reconfigure. slurmctld takes a string only for a place its topology
// has, keeps a dynamic node's string in its state, and applies it over the file at every
// reconfigure and restart, stopping when the file lacks a place a string names (docs/
// topology.md). So a move goes in three steps, each in its own reconcile:
//
//  1. the file gets the node's new place (debounced, then a reconfigure), and keeps every
//     place a node's string still names (render.KeepPlaces);
//  2. once slurmctld runs that file, the node update moves the node;
//  3. the next file drops the old place, which no string names any more.
//
// A move to a place the running file already has skips step 1.

// topologyStrPlan is what the moves by topology_str need now.
type topologyStrPlan struct {
	// moves are the nodes to update now: their new place is in the running file.
	moves []render.TopologyMove
	// waiting are the nodes whose new place the running file lacks: the file comes first.
	waiting []string
	// keep are the places nodes' strings name that the desired file lacks, and why.
	keep [][]string
	why  []string
	// err: a node's string names another topology; the file must not change.
	err error
}

// planTopologyStr decides the moves by topology_str. running is the file slurmctld runs (nil
// before the first), desired the rendering from the node labels, and strs every node
// slurmctld has with its topology_str ("" for a node the file places); nil strs means Slurm
// could not be read: then every place of the running file is kept, as any might be named.
func planTopologyStr(running *render.FileTopology, desired *render.Topology, strs map[string]string) topologyStrPlan {
	var p topologyStrPlan
	name := render.TopologyKind(desired)
	if strs == nil {
		if running != nil {
			for _, u := range slices.Sorted(maps.Keys(running.Units)) {
				place := strings.Split(u, ":")
				if !desired.HasPlace(place) {
					p.keep, p.why = append(p.keep, place), append(p.why, "Slurm's topology_str cannot be read")
				}
			}
		}
		return p
	}
	// The places slurmctld holds by string: the file must keep each.
	for _, node := range slices.Sorted(maps.Keys(strs)) {
		place, ok := strPlace(strs[node], name)
		switch {
		case strs[node] == "":
		case !ok:
			p.err = fmt.Errorf("node %s is placed by topology_str %q, outside topology %q", node, strs[node], name)
			return p
		case !desired.HasPlace(place):
			p.keep, p.why = append(p.keep, place), append(p.why, node+"'s topology_str")
		}
	}
	if running == nil || running.Name != name {
		return p
	}
	for _, node := range slices.Sorted(maps.Keys(desired.Places)) {
		str, known := strs[node]
		if !known { // slurmd not registered: it will be placed by the file
			continue
		}
		now, _ := strPlace(str, name)
		if str == "" {
			now = running.Places[node]
		}
		want := desired.Places[node]
		switch {
		case now == nil || render.PlaceKey(now) == render.PlaceKey(want):
		case running.Units[render.PlaceKey(want)]:
			p.moves = append(p.moves, render.TopologyMove{Node: node, TopologyStr: render.TopologyStr(name, want)})
		default:
			p.waiting = append(p.waiting, node)
		}
	}
	return p
}

// strPlace is the place a topology_str gives in topology name.
func strPlace(str, name string) ([]string, bool) {
	for _, s := range strings.Split(str, ",") {
		if topo, units, ok := strings.Cut(s, ":"); ok && topo == name && units != "" {
			return strings.Split(units, ":"), true
		}
	}
	return nil, false
}

// topologyStrs are the topology_str of every node slurmctld has, from the cluster's node table
// (the node watchers' cache when it has them: slurmconn.Pool.Nodes); nil when Slurm cannot be
// read (planTopologyStr then keeps every place).
func (r *Reconciler) topologyStrs(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, keys slurmconn.Keys) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sl, err := r.slurmFor(ctx, sc, n, keys)
	var nodes []slurm.Node
	if err == nil {
		nodes, err = r.Slurm.Nodes(ctx, n, sc.Spec.Controller.NodeWatcher, sl)
	}
	if err != nil {
		log.FromContext(ctx).V(1).Info("reading the nodes' topology_str; the file keeps every place", "error", err.Error())
		return nil
	}
	strs := make(map[string]string, len(nodes))
	for _, node := range nodes {
		strs[node.Name] = node.Topology
	}
	return strs
}

// keepStringPlaces makes desired keep the places nodes' strings name (step 1 above).
func (r *Reconciler) keepStringPlaces(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, keys slurmconn.Keys, current string, desired *render.Topology) error {
	var running *render.FileTopology
	if current != "" {
		running, _ = render.ReadTopologyYAML(current) // a file sunk did not write names nothing to keep
	}
	strs := r.topologyStrs(ctx, sc, n, keys)
	p := planTopologyStr(running, desired, strs)
	if p.err != nil {
		return p.err
	}
	pending, err := r.pendingRegistrations(ctx, n)
	if err != nil {
		return err
	}
	keep, why := pendingPlaces(desired, strs, pending)
	return desired.KeepPlaces(append(p.keep, keep...), append(p.why, why...))
}

// pendingRegistrations are the Topology= of compute pods that register with one
// (clusternames.RegisteredTopology), by pod.
func (r *Reconciler) pendingRegistrations(ctx context.Context, n clusternames.Names) (map[string]string, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(n.Namespace), client.MatchingLabels(render.SelectorLabels(n, wellknown.ComponentCompute))); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i := range pods.Items {
		if str := clusternames.RegisteredTopology(&pods.Items[i]); str != "" && pods.Items[i].DeletionTimestamp.IsZero() {
			out[pods.Items[i].Name] = str
		}
	}
	return out, nil
}

// pendingPlaces are the places compute pods will register with (pending, by pod) that
// desired lacks, for pods whose Slurm node has no topology_str yet (strs; nil: Slurm could
// not be read, and planTopologyStr keeps every place already): the pod was made while the
// file had its place, and a registration naming a place the file dropped meanwhile would be
// refused, so the file keeps it until the node has registered (then its topology_str keeps
// it, or the node moves on).
func pendingPlaces(desired *render.Topology, strs, pending map[string]string) (keep [][]string, why []string) {
	if strs == nil {
		return nil, nil
	}
	name := render.TopologyKind(desired)
	for _, pod := range slices.Sorted(maps.Keys(pending)) {
		if strs[pod] != "" {
			continue
		}
		if place, ok := strPlace(pending[pod], name); ok && !desired.HasPlace(place) {
			keep, why = append(keep, place), append(why, pod+"'s registration")
		}
	}
	return keep, why
}

// moveByTopologyStr moves the nodes whose new place the running file has (step 2 above),
// once slurmctld runs the rendered configuration; it says how soon to look again while
// nodes move.
func (r *Reconciler) moveByTopologyStr(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, cfg *render.Config, desired *render.Topology, keys slurmconn.Keys, st *status) (time.Duration, error) {
	file, ok := cfg.Files[render.TopologyYAMLFile]
	if desired == nil || desired.Also != nil || !ok || st.configHash != cfg.Hash { // see topology()
		return 0, nil
	}
	running, err := render.ReadTopologyYAML(file)
	if err != nil {
		return 0, err
	}
	strs := r.topologyStrs(ctx, sc, n, keys)
	if strs == nil {
		return pollWhileConverging, nil
	}
	p := planTopologyStr(running, desired, strs)
	if p.err != nil || len(p.moves)+len(p.waiting) == 0 {
		return 0, nil // the file step reported p.err
	}
	sl, err := r.slurmFor(ctx, sc, n, keys)
	if err != nil {
		return 0, err
	}
	var failed []string
	for _, m := range p.moves {
		str := m.TopologyStr
		if err := sl.UpdateNode(ctx, m.Node, slurm.NodeUpdate{Topology: &str}); err != nil {
			failed = append(failed, m.Node)
			r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonTopologyMoveFailed, fmt.Sprintf("moving node %s to %s: %v", m.Node, str, err))
			continue
		}
		r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonTopologyMoved, fmt.Sprintf("node %s moved to %s by topology_str", m.Node, str))
	}
	msg := fmt.Sprintf("%d nodes moved by topology_str", len(p.moves)-len(failed))
	if len(failed) > 0 {
		msg += fmt.Sprintf(", %d failed (%s)", len(failed), strings.Join(failed, ", "))
	}
	if len(p.waiting) > 0 {
		msg += fmt.Sprintf("; %d wait for the topology file to have their new switch or block (%s)", len(p.waiting), strings.Join(p.waiting, ", "))
	}
	st.set(sunkv1.ConditionTopologyReady, false, sunkv1.ReasonTopologyMoving, msg)
	return pollWhileConverging, nil
}
