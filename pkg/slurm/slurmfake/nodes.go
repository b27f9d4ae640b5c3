package slurmfake

// Nodes: listing, reading, updating and deleting them as slurmctld does.

import (
	"context"
	"slices"
	"sort"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

func (f *Fake) ListNodes(ctx context.Context, since time.Time) (*slurm.NodeList, error) {
	if err := f.enter(ctx, "ListNodes"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	now := f.now()
	if !since.IsZero() && since.After(f.nodesChanged) {
		return &slurm.NodeList{NotModified: true, LastUpdate: since}, nil
	}
	l := &slurm.NodeList{LastUpdate: now, Nodes: make([]slurm.Node, 0, len(f.nodes))}
	for _, n := range f.nodes {
		l.Nodes = append(l.Nodes, clone(n))
	}
	sort.Slice(l.Nodes, func(i, j int) bool { return l.Nodes[i].Name < l.Nodes[j].Name })
	return l, nil
}

func clone(n slurm.Node) slurm.Node {
	n.State = slices.Clone(n.State)
	n.Features = slices.Clone(n.Features)
	n.ActiveFeatures = slices.Clone(n.ActiveFeatures)
	n.Partitions = slices.Clone(n.Partitions)
	return n
}

func (f *Fake) GetNode(ctx context.Context, name string) (*slurm.Node, error) {
	if err := f.enter(ctx, "GetNode"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	n, ok := f.nodes[name]
	if !ok {
		return nil, notFound("node", name)
	}
	n = clone(n)
	return &n, nil
}

// UpdateNode applies u like slurmctld: DRAIN/DOWN need a reason; RESUME/UNDRAIN clear DRAIN
// (and DOWN for RESUME) but, as Slurm 24.11 does, keep the old reason.
// UpdateNode updates one node or a list of them ("a,b" or a hostlist expression), in order,
// as slurmctld does: it stops at the first node it cannot update, leaving the earlier ones
// updated.
func (f *Fake) UpdateNode(ctx context.Context, name string, u slurm.NodeUpdate) error {
	if err := f.enter(ctx, "UpdateNode"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	names, err := slurm.ExpandHostlist(name)
	if err != nil {
		return &slurm.SlurmError{Endpoint: "slurmfake node", HTTPStatus: 500, Code: 2001, Description: err.Error()}
	}
	for _, one := range names {
		if err := f.updateNode(one, u); err != nil {
			return err
		}
	}
	return nil
}

func (f *Fake) updateNode(name string, u slurm.NodeUpdate) error {
	n, ok := f.nodes[name]
	if !ok {
		return notFound("node", name)
	}
	if u.Reason != nil {
		n.Reason, n.ReasonSetBy, n.ReasonChangedAt = *u.Reason, "root", f.now()
	}
	switch u.State {
	case "":
	case slurm.NodeStateDrain, slurm.NodeStateDown:
		if u.Reason == nil || *u.Reason == "" {
			return &slurm.SlurmError{Endpoint: "slurmfake node", HTTPStatus: 500, Code: 2028,
				Description: "a reason is required to drain or down a node"}
		}
		if u.State == slurm.NodeStateDrain {
			n.State = addFlag(n.State, "DRAIN")
		} else {
			n.State = append([]string{"DOWN"}, withoutBase(n.State)...)
		}
	case slurm.NodeStateResume, slurm.NodeStateUndrain:
		if !slices.Contains(n.State, "DRAIN") && !(u.State == slurm.NodeStateResume && n.BaseState() == "DOWN") {
			return &slurm.SlurmError{Endpoint: "slurmfake node", HTTPStatus: 500, Code: 2028, Description: "Invalid node state specified"}
		}
		n.State = slices.DeleteFunc(n.State, func(s string) bool { return s == "DRAIN" })
		if u.State == slurm.NodeStateResume && n.BaseState() == "DOWN" {
			n.State[0] = "IDLE"
		}
	default:
		n.State = append([]string{string(u.State)}, withoutBase(n.State)...)
	}
	if u.Features != nil {
		n.Features, n.ActiveFeatures = slices.Clone(*u.Features), slices.Clone(*u.Features)
	}
	if u.ActiveFeatures != nil {
		n.ActiveFeatures = slices.Clone(*u.ActiveFeatures)
	}
	if u.Comment != nil {
		n.Comment = *u.Comment
	}
	if u.Extra != nil {
		n.Extra = *u.Extra
	}
	if u.Weight != nil {
		n.Weight = *u.Weight
	}
	if u.Gres != nil {
		n.Gres = *u.Gres
	}
	f.nodes[name] = n
	f.touchNodes()
	return nil
}

func addFlag(state []string, flag string) []string {
	if slices.Contains(state, flag) {
		return state
	}
	return append(slices.Clone(state), flag)
}

func withoutBase(state []string) []string {
	if len(state) == 0 {
		return nil
	}
	return slices.Clone(state[1:])
}

func (f *Fake) DeleteNode(ctx context.Context, name string) error {
	if err := f.enter(ctx, "DeleteNode"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if _, ok := f.nodes[name]; !ok {
		return notFound("node", name)
	}
	for _, j := range f.jobs {
		if j.BaseState() == "RUNNING" && j.Nodes == name {
			return &slurm.SlurmError{Endpoint: "slurmfake node", HTTPStatus: 500, Description: "node " + name + " has running jobs"}
		}
	}
	delete(f.nodes, name)
	f.touchNodes()
	return nil
}
