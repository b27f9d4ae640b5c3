package render

import (
	"fmt"
	"strings"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
)

// Config is the rendered configuration of a SlurmCluster.
type Config struct {
	// Files of the config ConfigMap (mounted at ConfigDir): slurm.conf, cgroup.conf,
	// plugstack.conf, gres.conf and job_submit.lua when set.
	Files map[string]string
	// Scripts of the scripts ConfigMap (mounted at ScriptsDir, executable): the prolog
	// and epilog drivers and the scripts they run in order.
	Scripts map[string]string
	// Hash covers every file and script: it changes exactly when Slurm must reread them.
	Hash string
	// RestartHash covers only the settings slurmctld applies at start (ports, auth,
	// state location...): it changes exactly when a reconfigure is not enough.
	RestartHash string
	// GPUDevices says gres.conf includes each compute pod's own device lines
	// (ConfigInputs.GPUs): a slurmd with GPUs registers them only under such a configuration.
	GPUDevices bool
	// Containers says plugstack.conf loads sunk's SPANK plugin (ConfigInputs.Containers): a
	// NodeSet with containers creates pods only under such a configuration.
	Containers bool
}

// ResolvedScript is a prolog or epilog script with its text read (from the spec or a ConfigMap).
type ResolvedScript struct {
	Name string
	Text string
}

// ConfigInputs are what the controller reads from the cluster before rendering.
type ConfigInputs struct {
	Names  clusternames.Names
	Prolog []ResolvedScript
	Epilog []ResolvedScript
	// Topology is the rendered topology.conf, with spec.topology set; nil renders one
	// without nodes.
	Topology *Topology
	// GPUs says a NodeSet of the cluster grants its pods GPUs: only then does gres.conf
	// include each pod's own device lines (GresNodeConfPath).
	GPUs bool
	// TopologyYAML says the cluster's Slurm reads topology.yaml (25.05 and later): the
	// topology is written there, as the cluster default named after its kind (with tree and
	// block, the tree, and the blocks beside it), instead of topology.conf and
	// TopologyPlugin, and partitions get their Topology=. False (24.11) renders topology.conf.
	TopologyYAML bool
	// QuiesceTimeout says the cluster's slurmctld gives up a quiesce after
	// conmgr_quiesce_timeout (26.05): slurm.conf then sets it to QuiesceTimeout.
	QuiesceTimeout bool
	// GPUTypes are the GRES types the cluster's NodeSets name in spec.gpuType: accounting
	// tracks each of them beside gres/gpu (AccountingTRES).
	GPUTypes []string
	// Containers says a NodeSet of the cluster enables containers for jobs: plugstack.conf
	// loads sunk's SPANK plugin (containers.go).
	Containers bool
}

// RenderConfig renders slurm.conf and its companions. It fails only on input it cannot
// express (for example a partition naming an unknown NodeSet is fine: Slurm allows empty
// NodeSets, so that a partition can exist before its nodes do).
func RenderConfig(sc *sunkv1.SlurmCluster, in ConfigInputs) (*Config, error) {
	n := in.Names
	files := map[string]string{
		"slurm.conf":     slurmConf(sc, in),
		"cgroup.conf":    mergeConf(defaultCgroupConf, sc.Spec.CgroupConf),
		"plugstack.conf": plugstackConf(in.Containers),
		"gres.conf":      gresConfFor(in.GPUs),
		gresNodeConfName: gresNodeConf,
	}
	if sc.Spec.JobSubmitLua != "" {
		files["job_submit.lua"] = JobSubmitLua(sc.Spec.JobSubmitLua)
	}
	if sc.Spec.Topology != nil {
		topo, err := topologyOrEmpty(sc, in)
		if err != nil {
			return nil, err
		}
		name, text, err := TopologyFile(topo, in.TopologyYAML)
		if err != nil {
			return nil, err
		}
		files[name] = text
	}
	scripts := map[string]string{}
	for _, kind := range []struct {
		name    string
		scripts []ResolvedScript
	}{{"prolog", in.Prolog}, {"epilog", in.Epilog}} {
		if len(kind.scripts) == 0 {
			continue
		}
		var order []string
		for i, s := range kind.scripts {
			key := fmt.Sprintf("%s-%02d-%s", kind.name, i, s.Name)
			scripts[key] = s.Text
			order = append(order, key)
		}
		scripts[kind.name] = scriptDriver(n.Cluster, kind.name, order)
	}
	c := &Config{Files: files, Scripts: scripts, GPUDevices: in.GPUs, Containers: in.Containers}
	c.Hash = hashOf(files, scripts)
	c.RestartHash = hashOf(map[string]string{"restart": restartSettings(files["slurm.conf"])}, nil)
	files["slurm.conf"] = slurmConfHeader(n.Namespace, n.Cluster, c.Hash) + files["slurm.conf"]
	return c, nil
}

// TopologyKind names a topology in topology.yaml after its plugin: "tree" or "block"; the
// <topology> of its nodes' topology_str (TopologyStr).
func TopologyKind(t *Topology) string { return strings.TrimPrefix(t.Plugin, "topology/") }

// TopologyFile is the file slurmctld reads the topology from, and its text: topology.conf, or
// with yaml (Slurm 25.05 and later) topology.yaml with the topology as the cluster default
// named after its kind, and Also (the blocks beside a tree) after it under its own kind's
// name. A topology with Kept set is that text, as written before. topology.conf holds one
// topology: with tree and block (a cluster upgrading from 24.11, whose configuration is for
// the oldest release still running) it is the tree alone, and no partition names a topology
// (partitions) until topology.yaml.
func TopologyFile(t *Topology, yaml bool) (name, text string, err error) {
	if !yaml {
		return "topology.conf", t.Conf, nil
	}
	if t.Kept != "" {
		return TopologyYAMLFile, t.Kept, nil
	}
	topos := []NamedTopology{{Name: TopologyKind(t), Default: true, Topology: t}}
	if t.Also != nil {
		topos = append(topos, NamedTopology{Name: TopologyKind(t.Also), Topology: t.Also})
	}
	y, err := RenderTopologyYAML(topos)
	return TopologyYAMLFile, y, err
}

// topologyOrEmpty is the topology of the inputs, or one without nodes; nil without
// spec.topology.
func topologyOrEmpty(sc *sunkv1.SlurmCluster, in ConfigInputs) (*Topology, error) {
	if sc.Spec.Topology == nil {
		return nil, nil
	}
	if in.Topology != nil {
		return in.Topology, nil
	}
	return RenderTopology(sc.Spec.Topology, nil)
}

// ConstrainDevices: a job sees only the GRES devices (GPUs) it was allocated. With cgroup/v2,
// Slurm 24.11 does it with an eBPF device program per job and step (src/plugins/cgroup/v2/
// ebpf.c), which slurmd in its privileged compute pod can load; a node without GRES devices
// loads none (the program would be a no-op).
const defaultCgroupConf = `CgroupPlugin=autodetect
IgnoreSystemd=yes
ConstrainCores=yes
ConstrainDevices=yes
ConstrainRAMSpace=yes
`

func scriptDriver(cluster, kind string, order []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# The %s of SlurmCluster %s: runs each script in order; the first failure fails the %s.\n", kind, cluster, kind)
	fmt.Fprintf(&b, "for s in %s; do\n", strings.Join(order, " "))
	fmt.Fprintf(&b, "  %s/\"$s\" || { rc=$?; echo \"sunk: %s script $s failed with exit $rc\" >&2; exit $rc; }\ndone\n", ScriptsDir, kind)
	return b.String()
}
