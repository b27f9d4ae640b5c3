package wellknown

// Kubernetes node labels that describe the network, by convention, outermost level first.
// SlurmCluster spec.topology presets name them (api/v1alpha1 TopologyPreset values).
var (
	// TreePresetLabels are the switch levels of each tree preset.
	TreePresetLabels = map[string][]string{
		// NVIDIA topograph: tier-1 is the leaf switch, tier-3 the core.
		"topograph": {"fabric.topograph.run/tier-3", "fabric.topograph.run/tier-2", "fabric.topograph.run/tier-1"},
		// GKE: a block of sub-blocks of hosts.
		"gke": {"cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock", "cloud.google.com/gce-topology-host"},
		// AWS: layer 1 is the farthest network node from the instance, layer 3 the nearest.
		"aws": {"topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2", "topology.k8s.aws/network-node-layer-3"},
		// CoreWeave's InfiniBand labels: fabric, superpod, leaf group.
		"coreweave": {"ib.coreweave.cloud/fabric", "ib.coreweave.cloud/superpod", "ib.coreweave.cloud/leafgroup"},
	}
	// BlockPresetLabel is the block label of each block preset.
	BlockPresetLabel = map[string]string{
		// NVIDIA topograph's accelerator (NVLink) domain.
		"topograph": "accelerator.topograph.run/domain",
		// GPU Feature Discovery's NVLink clique ("<cluster uuid>.<clique id>").
		"nvidia-gpu-clique": "nvidia.com/gpu.clique",
	}
)

// Annotations on a Kubernetes node that override its labels for spec.topology: where the
// labels are wrong or missing and an admin knows better.
const (
	// AnnotationTopologyTree is the node's switches, outermost first, separated by "/"
	// ("spine-a/leaf-3"); it replaces the values of spec.topology.tree's label keys.
	AnnotationTopologyTree = "topology.sunk.dev/tree"
	// AnnotationTopologyBlock is the node's block; it replaces spec.topology.block's label.
	AnnotationTopologyBlock = "topology.sunk.dev/block"
)
