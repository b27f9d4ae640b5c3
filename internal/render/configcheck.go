package render

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"strconv"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// A new configuration can be checked by Slurm itself before the operator applies it: a pod of
// the cluster's own image runs scontrol, which parses slurm.conf (every key and value Slurm
// reads at startup) before it does anything, on the candidate files, and exits non-zero with
// Slurm's own message otherwise. The pod talks to no daemon and mounts no key: scontrol needs
// a slurm.key next to slurm.conf to load its auth plugin, so the script makes a throwaway one.

// envCheckedHash is the check pod's variable with the hash of the configuration it checks.
const envCheckedHash = "SUNK_CONFIG_HASH"

// configCheckScript checks the candidate files in /candidate; ExitStaleCandidate says that
// they were replaced by another configuration before the pod read them.
var configCheckScript = `set -u
d=$(mktemp -d)
cp /candidate/* "$d"/
head -n1 "$d/slurm.conf" | grep -q "` + ConfigHashLine + `$` + envCheckedHash + `" || { echo "stale candidate" > /dev/termination-log; exit ` + strconv.Itoa(ExitStaleCandidate) + `; }
head -c 1024 /dev/urandom > "$d/slurm.key"
out=$(SLURM_CONF="$d/slurm.conf" scontrol show hostnames sunk-config-check 2>&1); rc=$?
printf '%s\n' "$out" | tail -c 2048 > /dev/termination-log
exit $rc
`

// ExitStaleCandidate is the check pod's exit code when the candidate ConfigMap holds another
// configuration than the pod's (a newer spec replaced it).
const ExitStaleCandidate = 3

// ConfigCheckConfigMap holds the candidate files the check pod reads.
func ConfigCheckConfigMap(n clusternames.Names, cfg *Config) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: meta(n, n.ConfigCheck, wellknown.ComponentConfigCheck), Data: cfg.Files}
}

// ConfigCheckPod runs Slurm's parser on the candidate files of cfg; it ends Succeeded when
// Slurm accepts them, else Failed with Slurm's message as its termination message.
func ConfigCheckPod(sc *sunkv1.SlurmCluster, n clusternames.Names, cfg *Config) *corev1.Pod {
	m := meta(n, n.ConfigCheckName(cfg.Hash), wellknown.ComponentConfigCheck)
	m.Annotations = map[string]string{wellknown.AnnotationConfigHash: cfg.Hash}
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	return &corev1.Pod{
		ObjectMeta: m,
		Spec: corev1.PodSpec{
			ImagePullSecrets:              sc.Spec.ImagePullSecrets,
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			ActiveDeadlineSeconds:         ptr.To(int64(120)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: ptr.To(int64(SlurmUID)), RunAsGroup: ptr.To(int64(SlurmGID)), RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "check",
				Image:           imageOf(sc, sc.Spec.Controller.Image),
				ImagePullPolicy: sc.Spec.ImagePullPolicy,
				Command:         []string{"/bin/sh", "-c", configCheckScript},
				Env:             []corev1.EnvVar{{Name: envCheckedHash, Value: cfg.Hash}},
				Resources:       corev1.ResourceRequirements{Requests: small, Limits: small},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "candidate", MountPath: "/candidate", ReadOnly: true}, {Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{
				configMapVolume("candidate", n.ConfigCheck, 0o444),
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("16Mi"))}}},
			},
		},
	}
}

// ConfigCheckVerdict reads a check pod: done when it ended, with Slurm's message when it
// failed; stale when its candidate was replaced before it read it.
func ConfigCheckVerdict(p *corev1.Pod) (done, ok, stale bool, msg string) {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return true, t.ExitCode == 0, t.ExitCode == ExitStaleCandidate, t.Message
		}
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return true, true, false, ""
	case corev1.PodFailed:
		return true, false, false, p.Status.Message
	}
	return false, false, false, ""
}
