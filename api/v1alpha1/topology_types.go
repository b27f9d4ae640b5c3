// The network topology of a SlurmCluster: which Kubernetes node labels become Slurm's
// topology.conf (docs/topology.md).

package v1alpha1

// TopologySpec makes Slurm's topology plugin follow the Kubernetes nodes the compute pods
// run on: sunk renders topology.conf (24.11) or topology.yaml (25.05 and later) from their
// labels. Slurm 24.11 runs one plugin at a time, so there exactly one of tree and block is
// set. On 26.05 both may be: topology.yaml then holds the topologies "tree" (the cluster
// default) and "block", and a partition picks one with spec.partitions[].topology.
// +kubebuilder:validation:XValidation:rule="has(self.tree) || has(self.block)",message="at least one of tree and block must be set"
type TopologySpec struct {
	// Tree is Slurm's topology/tree: switches in levels, from label values.
	// +optional
	Tree *TreeTopology `json:"tree,omitempty"`

	// Block is Slurm's topology/block: blocks of nodes (an NVLink domain, a rack), from one
	// label's values.
	// +optional
	Block *BlockTopology `json:"block,omitempty"`
}

// TopologyName names a topology of topology.yaml after its kind: what a partition's
// Topology= says.
// +kubebuilder:validation:Enum=tree;block
type TopologyName string

// The topologies of topology.yaml.
const (
	TopologyTree  TopologyName = "tree"
	TopologyBlock TopologyName = "block"
)

// Has says whether the spec defines the topology named n.
func (t *TopologySpec) Has(n TopologyName) bool {
	switch {
	case t == nil:
		return false
	case n == TopologyTree:
		return t.Tree != nil
	case n == TopologyBlock:
		return t.Block != nil
	}
	return false
}

// TopologyPreset names a label convention of a provider or tool.
// +kubebuilder:validation:Enum=topograph;gke;aws;coreweave;nvidia-gpu-clique
type TopologyPreset string

// Presets. Their label keys live in pkg/wellknown (TreePresetLabels, BlockPresetLabel).
const (
	// PresetTopograph: NVIDIA topograph's fabric.topograph.run/tier-3,2,1 (tree) and
	// accelerator.topograph.run/domain (block).
	PresetTopograph TopologyPreset = "topograph"
	// PresetGKE: cloud.google.com/gce-topology-block, -subblock, -host (tree).
	PresetGKE TopologyPreset = "gke"
	// PresetAWS: topology.k8s.aws/network-node-layer-1, 2, 3 (tree).
	PresetAWS TopologyPreset = "aws"
	// PresetCoreWeave: ib.coreweave.cloud/fabric, superpod, leafgroup (tree).
	PresetCoreWeave TopologyPreset = "coreweave"
	// PresetNVIDIAGPUClique: nvidia.com/gpu.clique, the NVLink domain GPU Feature Discovery
	// labels (block).
	PresetNVIDIAGPUClique TopologyPreset = "nvidia-gpu-clique"
)

// TreeTopology: one switch level per label key. A node's switches are the values of the keys
// it carries, from the outermost key it has down to the innermost, which it must have; a gap
// (an outer key present, an inner one missing) or a missing innermost key puts the node under
// the switch "unknown". Two nodes share a switch when their values agree from the top down
// to that level, so leaf "l1" under spine "s1" and "l1" under "s2" are two switches.
// +kubebuilder:validation:XValidation:rule="has(self.preset) != has(self.labelKeys)",message="exactly one of preset and labelKeys must be set"
type TreeTopology struct {
	// Preset is a known label convention: topograph, gke, aws or coreweave.
	// +optional
	Preset TopologyPreset `json:"preset,omitempty"`

	// LabelKeys are the Kubernetes node label keys of the switch levels, outermost (the
	// spine or fabric) first, the leaf switch last.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=317
	// +optional
	LabelKeys []string `json:"labelKeys,omitempty"`
}

// BlockTopology: nodes with the same value of one label form a block; nodes without it form
// the block "unknown".
// +kubebuilder:validation:XValidation:rule="has(self.preset) != has(self.labelKey)",message="exactly one of preset and labelKey must be set"
type BlockTopology struct {
	// Preset is a known label convention: topograph or nvidia-gpu-clique.
	// +optional
	Preset TopologyPreset `json:"preset,omitempty"`

	// LabelKey is the Kubernetes node label whose value names a node's block.
	// +kubebuilder:validation:MaxLength=317
	// +optional
	LabelKey string `json:"labelKey,omitempty"`

	// BlockSizes is Slurm's BlockSizes: the base block's node count first, then each larger
	// aggregate as the base times a power of two (for example 18,36,72). A block with fewer
	// registered nodes than the base would stop slurmctld, so sunk leaves such a block out
	// (its nodes get no topology) and says so in the TopologyReady condition. Without it,
	// the base is the smallest labelled block, with Slurm's default aggregates (x1 to x16).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65536
	// +optional
	BlockSizes []int32 `json:"blockSizes,omitempty"`
}

// TopologyStatus is what the last rendering of topology.conf found.
type TopologyStatus struct {
	// Nodes is how many compute nodes the topology places.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// UnlabelledNodes are placed under the switch or block "unknown": their Kubernetes node
	// lacks the labels.
	// +optional
	UnlabelledNodes int32 `json:"unlabelledNodes,omitempty"`
	// ExcludedNodes are in no block: their block has fewer nodes than the base block size.
	// +optional
	ExcludedNodes int32 `json:"excludedNodes,omitempty"`
}
