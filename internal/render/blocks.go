// Building blocks of every workload: labels and metadata, the Slurm container, volumes,
// mounts, pod security, claims, Services and the pod template.

package render

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// SelectorLabels select the pods of one component of one cluster.
func SelectorLabels(n clusternames.Names, component string) map[string]string {
	return map[string]string{wellknown.LabelCluster: n.Cluster, wellknown.LabelComponent: component}
}

func labels(n clusternames.Names, component string) map[string]string {
	l := SelectorLabels(n, component)
	l["app.kubernetes.io/name"] = "slurm"
	l["app.kubernetes.io/instance"] = n.Cluster
	l["app.kubernetes.io/component"] = component
	l["app.kubernetes.io/managed-by"] = "sunk-operator"
	if n.SlurmVersion != "" {
		l[wellknown.LabelSlurmVersion] = n.SlurmVersion
	}
	return l
}

func meta(n clusternames.Names, name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: n.Namespace, Labels: labels(n, component)}
}

func imageOf(sc *sunkv1.SlurmCluster, override sunkv1.Image) string {
	if override != "" {
		return string(override)
	}
	return string(sc.Spec.Image)
}

// ReadyCommandTimeout (seconds) bounds each Slurm command of a readiness probe: sunk-ready's
// SUNK_READY_TIMEOUT default (images/slurm/rootfs/usr/local/bin/sunk-ready).
const ReadyCommandTimeout = 10

// ReadinessPeriod (seconds) is how often kubelet probes a Slurm container;
// computeReadinessPeriod slurmd's (compute.go, slurmdReadiness), whose TCP probe
// computeConnectTimeout bounds.
const (
	ReadinessPeriod        = 10
	computeReadinessPeriod = 5
	computeConnectTimeout  = 3
)

// slurmContainer is a container of the Slurm image running sunk-entrypoint ROLE.
func slurmContainer(sc *sunkv1.SlurmCluster, role string, image sunkv1.Image, res corev1.ResourceRequirements) corev1.Container {
	return corev1.Container{
		Name:            role,
		Image:           imageOf(sc, image),
		ImagePullPolicy: sc.Spec.ImagePullPolicy,
		Args:            []string{role},
		Resources:       res,
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/usr/local/bin/sunk-ready", role}}},
			// Kubernetes' default period. Every exec probe is a runc exec, about as costly as
			// starting a container: with a 5 s period, three small e2e clusters and their tests'
			// commands kept 8 to 23 runc processes running on 2 cores, and slurmctld's probes
			// timed out, leaving `timeout` zombies to slurmctld (PID 1), which never reaps them.
			PeriodSeconds:    ReadinessPeriod,
			TimeoutSeconds:   ReadyCommandTimeout,
			FailureThreshold: 3,
		},
	}
}

func configMapVolume(name, cm string, mode int32) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: cm}, DefaultMode: ptr.To(mode)}}}
}

func secretVolume(name, secret string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret, DefaultMode: ptr.To(int32(0o400))}}}
}

// KeysVolume projects the auth key, the auth key ring when the Secret has one, and the JWT key
// when withJWT, into KeysMountDir. The daemons read the files there, not copies, so that a
// reconfigure loads what kubelet refreshed (docs/security.md, "Rotating keys"). The ring is an
// optional item of its own: a Secret without it (every cluster before its first rotation)
// still mounts, and the file appears once a rotation writes it.
func KeysVolume(n clusternames.Names, withJWT bool) corev1.Volume {
	sources := []corev1.VolumeProjection{
		{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: n.AuthSecret},
			Items:                []corev1.KeyToPath{{Key: AuthKeyName, Path: AuthKeyName}}}},
		{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: n.AuthSecret},
			Items:                []corev1.KeyToPath{{Key: AuthRingName, Path: AuthRingName}},
			Optional:             ptr.To(true)}},
	}
	if withJWT {
		sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: n.JWTSecret},
			Items:                []corev1.KeyToPath{{Key: wellknown.SecretJWTKey, Path: wellknown.SecretJWTKey}}}})
	}
	return corev1.Volume{Name: "keys", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: sources, DefaultMode: ptr.To(int32(0o400))}}}
}

func mount(name, path string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: true}
}

// podSecurity gives the pods slurm's group on their volumes (OnRootMismatch: a shared /home
// must not be chowned file by file at every login pod start) and the container runtime's
// seccomp profile, which allows everything the daemons, sshd and s6 call.
func podSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		FSGroup:             ptr.To(int64(SlurmGID)),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// Capabilities the Slurm image's root entrypoint (sunk-entrypoint) needs before its daemon runs
// as its own user: it copies the keys owned by that user and chowns the state and run
// directories (CHOWN; DAC_OVERRIDE and FOWNER for a volume a former uid owns), and the daemon
// drops to wellknown.SlurmUser itself, or is started by setpriv (SETUID, SETGID). docs/security.md.
var daemonCapabilities = []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"}

// daemonSecurity is the container security of slurmctld, slurmdbd, slurmrestd and the managed
// MariaDB: every capability dropped but daemonCapabilities and add, and no privilege gained
// through setuid files (none of them executes one).
func daemonSecurity(add ...corev1.Capability) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities: &corev1.Capabilities{
			Drop: []corev1.Capability{"ALL"},
			Add:  append(append([]corev1.Capability{}, daemonCapabilities...), add...),
		},
	}
}

// loginSecurity is the login container's: the container runtime's default capabilities but
// MKNOD, NET_RAW, SETFCAP and SETPCAP, which none of sshd, sssd and s6 uses. sshd
// needs the rest (SYS_CHROOT for its privilege separation, NET_BIND_SERVICE for port 22,
// AUDIT_WRITE for PAM, KILL and the user switches for sessions), and users' su and sudo need
// privilege escalation, so it stays allowed.
func loginSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{Capabilities: &corev1.Capabilities{
		Drop: []corev1.Capability{"ALL"},
		Add: []corev1.Capability{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
			"NET_BIND_SERVICE", "SETGID", "SETUID", "SYS_CHROOT"},
	}}
}

func claimTemplate(name string, s sunkv1.StorageSpec, mode corev1.PersistentVolumeAccessMode) corev1.PersistentVolumeClaim {
	size := resource.MustParse("1Gi")
	if s.Size != nil {
		size = *s.Size
	}
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			StorageClassName: s.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}

func headlessService(n clusternames.Names, name, component string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta(n, name, component),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			// Daemons must resolve each other before they are Ready: slurmd registers with
			// slurmctld long before either probe passes.
			PublishNotReadyAddresses: true,
			Selector:                 SelectorLabels(n, component),
			Ports:                    []corev1.ServicePort{{Name: component, Port: port, TargetPort: intstr.FromInt32(port)}},
		},
	}
}

func service(n clusternames.Names, name, component string, typ corev1.ServiceType, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta(n, name, component),
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: SelectorLabels(n, component),
			Ports:    []corev1.ServicePort{{Name: component, Port: port, TargetPort: intstr.FromInt32(port)}},
		},
	}
}

func podTemplate(n clusternames.Names, component, restartHash string, pod corev1.PodSpec) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels(n, component)},
		Spec:       pod,
	}
	if restartHash != "" {
		t.Annotations = map[string]string{wellknown.AnnotationRestartHash: restartHash}
	}
	return t
}
