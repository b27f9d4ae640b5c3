package render

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// Containers for jobs (docs/containers.md): sunk's SPANK plugin and its helper, in sunk's Slurm
// images. plugstack.conf is one file for the whole configless cluster, so once a NodeSet enables
// containers every daemon and client of the cluster loads the plugin; a compute pod learns
// whether it has containers, and its settings, from EnvContainers, which the image's entrypoint
// writes to ContainersNodeConf. The helper refuses every container without that file.
const (
	// SpankPlugin is the plugin's path in sunk's Slurm images.
	SpankPlugin = "/usr/local/lib/sunk/spank/sunk_container.so"
	// ContainersNodeConf is the compute pod's settings file for the helper (--node-conf).
	ContainersNodeConf = "/run/sunk/containers.conf"
	// EnvContainers is the compute pod's variable holding ContainersNodeConf's text; only pods
	// of NodeSets with containers have it.
	EnvContainers = "SUNK_CONTAINERS"
	// ContainersDir is the compute pod's volume for the image cache (images/) and the
	// containers' writable layers (containers/): the helper's default --cache-dir and
	// --state-dir are below it. Not the pod's overlayfs root: overlayfs refuses an upper
	// directory on overlayfs.
	ContainersDir    = "/var/lib/sunk"
	containersVolume = "sunk-containers"
	// RegistryAuthDir holds the NodeSet's imagePullSecrets for the helper (--auth-dir), one
	// NN-NAME.json each, in the order listed, readable by root alone.
	RegistryAuthDir    = "/etc/sunk/registry-auth"
	registryAuthVolume = "sunk-registry-auth"
)

// plugstackConf is plugstack.conf: with containers, the plugin as `required` (slurmstepd ignores
// the errors of an optional plugin, and the plugin's errors are how a step fails cleanly).
func plugstackConf(containers bool) string {
	conf := "# SPANK plugins. Configless daemons receive this file with slurm.conf.\n"
	if containers {
		conf += "# Containers for jobs: a NodeSet of the cluster enables them. Nodes without " + ContainersNodeConf + "\n" +
			"# (NodeSets without containers) refuse a step that asks for one.\n" +
			"required " + SpankPlugin + " arg=--node-conf=" + ContainersNodeConf + "\n"
	}
	return conf
}

// ContainersNodeConfText is ContainersNodeConf's text for a NodeSet with containers: the
// helper's node flags, one a line.
func ContainersNodeConfText(ns *sunkv1.NodeSet) string {
	text := "# NodeSet " + ns.Name + ": containers for jobs (docs/containers.md)\n"
	if r := ns.Spec.Containers.InsecureRegistries; len(r) > 0 {
		text += "--insecure-registry=" + strings.Join(r, ",") + "\n"
	}
	if len(ns.Spec.Containers.ImagePullSecrets) > 0 {
		text += "--auth-dir=" + RegistryAuthDir + "\n"
	}
	if n := ImageCacheBound(ns); n > 0 {
		text += "--cache-max=" + strconv.FormatInt(n, 10) + "\n"
	}
	return text
}

// ImageCacheBound is the helper's bound on the image cache (--cache-max) for a NodeSet with
// cacheSize: three quarters of the emptyDir's limit. kubelet evicts the whole compute pod, and
// with it the node's running jobs, when the emptyDir outgrows its limit; the helper fails a
// step whose image does not fit its bound instead. The quarter left is for the containers'
// writable layers (in the same volume) and a pull whose image is larger than its manifest
// suggested. 0 (no bound) with cacheVolume or without cacheSize: the volume is sized elsewhere.
func ImageCacheBound(ns *sunkv1.NodeSet) int64 {
	q := ns.Spec.Containers.CacheSize
	if q == nil || ns.Spec.Containers.CacheVolume != nil {
		return 0
	}
	return q.Value() / 4 * 3
}

// containersPodSpec adds containers to a NodeSet's slurmd container and pod, if the NodeSet
// enables them: the settings in EnvContainers and the volume at ContainersDir (an emptyDir,
// limited to cacheSize, or cacheVolume). The container is already privileged (slurmd), which
// the helper needs for its mount namespaces and overlayfs: nothing more is added.
func containersPodSpec(ns *sunkv1.NodeSet, c *corev1.Container, vols []corev1.Volume) []corev1.Volume {
	if !ns.ContainersEnabled() {
		return vols
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: EnvContainers, Value: ContainersNodeConfText(ns)})
	src := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ns.Spec.Containers.CacheSize}}
	if v := ns.Spec.Containers.CacheVolume; v != nil {
		src = *v.DeepCopy()
	}
	// Writable, unlike mount(): the helper pulls, unpacks and writes layers there.
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: containersVolume, MountPath: ContainersDir})
	vols = append(vols, corev1.Volume{Name: containersVolume, VolumeSource: src})
	if secrets := ns.Spec.Containers.ImagePullSecrets; len(secrets) > 0 {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: registryAuthVolume, MountPath: RegistryAuthDir, ReadOnly: true})
		vols = append(vols, registryAuthVolumeSpec(secrets))
	}
	return vols
}

// registryAuthVolumeSpec projects each Secret's .dockerconfigjson as NN-NAME.json (the helper
// takes the first that names the image's registry), mode 0400: slurmd's container runs jobs
// as their users, and the pod has no fsGroup, so only root (the helper) reads them. A missing
// Secret or key keeps the pod from starting (kubelet's event names it) rather than pulling
// without the credentials the admin meant.
func registryAuthVolumeSpec(secrets []sunkv1.SecretName) corev1.Volume {
	var sources []corev1.VolumeProjection
	for i, s := range secrets {
		sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.Name},
			Items:                []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: fmt.Sprintf("%02d-%s.json", i, s.Name)}},
		}})
	}
	return corev1.Volume{Name: registryAuthVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: sources, DefaultMode: ptr.To[int32](0o400),
	}}}
}
