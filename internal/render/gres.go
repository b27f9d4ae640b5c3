package render

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
)

// ResourceGPU is the resource that becomes GRES gpu.
const ResourceGPU corev1.ResourceName = wellknown.ResourceGPU

// EnvGresConf is the compute pod's variable with its own gres.conf lines (SlurmdGresConf),
// which sunk-entrypoint writes to GresNodeConfPath before slurmd starts.
const EnvGresConf = "SUNK_GRES_CONF"

// GresNodeConfPath is the file the cluster's gres.conf includes. On a compute pod it holds
// the pod's own GPU lines (empty without GPUs): it is the one per-node part of a configless
// configuration, because a dynamic node's name is not known when gres.conf is rendered, and
// its GPUs are the pod's. The config ConfigMap carries it empty for slurmctld, which reads
// every Include of gres.conf to learn what to send to slurmd (an absolute path is not sent)
// and waits a minute for a missing one.
const GresNodeConfPath = ConfigDir + "/" + gresNodeConfName

const gresNodeConfName = "gres-node.conf"

// gresConfFor is the cluster's gres.conf: the Include of each pod's device lines when a NodeSet
// of the cluster has GPUs, else no line at all. Every slurmd reads gres.conf again at a
// reconfigure, and one whose image predates GresNodeConfPath has no such file: it would wait a
// minute for it and stop, its node going down under its jobs. Without GPUs (which could not
// work before the Include) nothing changes; a cluster that has them needs current images.
// Only slurmd loads its GRES from gres.conf: slurmctld does so for CLOUD nodes, and sunk's are
// dynamic nodes in the normal state.
func gresConfFor(gpus bool) string {
	if !gpus {
		return gresConfNoGPUs
	}
	return gresConf
}

const gresConfNoGPUs = "# No NodeSet of this cluster has GPUs. With one, the devices of each pod are included from\n" +
	"# its own " + gresNodeConfName + ", written by sunk-entrypoint.\n"

const gresConf = "# The GRES of a dynamic node are its slurmd's --conf \"Gres=...\" (NodeSet); their devices\n" +
	"# are in the pod's own " + gresNodeConfName + ", written by sunk-entrypoint.\n" +
	"Include " + GresNodeConfPath + "\n"

// gresNodeConf is the ConfigMap's GresNodeConfPath, for slurmctld.
const gresNodeConf = "# Empty here. A compute pod has its own, with its GPU device lines (NodeSet).\n"

// ComputeGPUs is the number of GPUs Kubernetes grants the slurmd container: its
// nvidia.com/gpu limit (else request; Kubernetes keeps them equal for extended resources).
func ComputeGPUs(ns *sunkv1.NodeSet) int64 {
	if q, ok := resourceOf(ns.Spec.Resources, ResourceGPU); ok {
		return max(q.Value(), 0)
	}
	return 0
}

// GPUGresConf is the pod's own gres.conf for n GPUs of type typ: one line with the device
// files of the first n GPUs, /dev/nvidia0 to /dev/nvidia<n-1> (a GPU GRES needs File=, and
// Debian's Slurm has no NVML to detect them); "" without GPUs. The pod is meant to hold all
// of its machine's GPUs: a privileged container sees every device, and which of them the
// device plugin granted is not known here.
func GPUGresConf(typ string, n int64) string {
	if n <= 0 {
		return ""
	}
	line := "Name=gpu"
	if typ != "" {
		line += " Type=" + typ
	}
	if n == 1 {
		return line + " File=/dev/nvidia0\n"
	}
	return line + " File=/dev/nvidia[0-" + strconv.FormatInt(n-1, 10) + "]\n"
}
