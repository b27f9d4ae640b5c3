package nodeset

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
)

// gpuConfigWait says why the pods of a NodeSet may not be created yet, "" when they may. A
// pod with GPUs registers them only if the configuration slurmctld runs has gres.conf include
// the pod's own device lines: before that its slurmd reports no GPUs, and slurmctld drains the
// node for good (INVALID_REG, "gres/gpu count reported lower than configured"). The
// SlurmCluster controller adds the Include once it sees a NodeSet with GPUs, and says it is
// running with its condition GPUDevicesIncluded; its status change wakes the NodeSet (the
// watch in SetupWithManager). Pods that exist are left alone: this only holds creation.
func gpuConfigWait(ns *sunkv1.NodeSet, sc *sunkv1.SlurmCluster) string {
	if render.ComputeGPUs(ns) == 0 || meta.IsStatusConditionTrue(sc.Status.Conditions, sunkv1.ConditionGPUDevicesIncluded) {
		return ""
	}
	return fmt.Sprintf("pods with GPUs wait until SlurmCluster %s runs a configuration whose gres.conf includes each pod's device lines (condition GPUDevicesIncluded): a slurmd registering before would report no GPUs and Slurm would drain its node", sc.Name)
}

// containersConfigWait says why the pods of a NodeSet with containers may not be created yet,
// "" when they may. A configless slurmd fetches plugstack.conf once, when it starts; the
// reconfigure that brings the plugin reaches only the slurmds registered by then, so a pod
// started in between would run every --container-image step on its own filesystem (seen in
// TestContainersForJobs). The SlurmCluster says the plugin is running with its condition
// ContainersEnabled.
func containersConfigWait(ns *sunkv1.NodeSet, sc *sunkv1.SlurmCluster) string {
	if !ns.ContainersEnabled() || meta.IsStatusConditionTrue(sc.Status.Conditions, sunkv1.ConditionContainersEnabled) {
		return ""
	}
	return fmt.Sprintf("pods with containers wait until SlurmCluster %s runs a configuration whose plugstack.conf loads the containers plugin (condition ContainersEnabled): a slurmd started before would not load it", sc.Name)
}

// createWait is why the pods of a NodeSet may not be created yet and its reason, "" when they
// may: the cluster's configuration does not yet have what they need to register.
func createWait(ns *sunkv1.NodeSet, sc *sunkv1.SlurmCluster) (reason, msg string) {
	if msg := gpuConfigWait(ns, sc); msg != "" {
		return sunkv1.ReasonWaitingForGPUConfig, msg
	}
	if msg := containersConfigWait(ns, sc); msg != "" {
		return sunkv1.ReasonWaitingForContainersConfig, msg
	}
	return "", ""
}
