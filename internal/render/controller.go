// slurmctld's workload: the controller StatefulSet with its node watchers beside it, its
// Services and its state claim.

package render

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/wellknown"
)

// ControllerContainer is the name of slurmctld's container.
const ControllerContainer = "slurmctld"

// ControllerService is slurmctld's headless Service: it gives each controller pod the
// stable DNS name slurm.conf's SlurmctldHost uses.
func ControllerService(n clusternames.Names) *corev1.Service {
	return headlessService(n, n.Controller, wellknown.ComponentController, clusternames.SlurmctldPort)
}

// ControllerPodServices are, with a backup, one ClusterIP Service per controller pod
// (clusternames.Names.ControllerAddr): its name resolves whether or not the pod exists, and
// while it does not, kube-proxy refuses connections to it. The addresses of pods that are not
// ready are published: slurmctld's readiness probe pings itself at this address, and the
// standby must be reachable.
func ControllerPodServices(sc *sunkv1.SlurmCluster, n clusternames.Names) []*corev1.Service {
	if Controllers(sc) == 1 {
		return nil
	}
	var out []*corev1.Service
	for i := 0; i < Controllers(sc); i++ {
		s := service(n, n.ControllerPod(i), wellknown.ComponentController, corev1.ServiceTypeClusterIP, clusternames.SlurmctldPort)
		s.Spec.Selector[appsv1.StatefulSetPodNameLabel] = n.ControllerPod(i)
		s.Spec.PublishNotReadyAddresses = true
		out = append(out, s)
	}
	return out
}

// ControllerStatefulSet runs slurmctld (and its backup) with the state volume.
func ControllerStatefulSet(sc *sunkv1.SlurmCluster, n clusternames.Names, cfg *Config) *appsv1.StatefulSet {
	c := slurmContainer(sc, ControllerContainer, sc.Spec.Controller.Image, sc.Spec.Controller.Resources)
	c.Ports = []corev1.ContainerPort{{Name: "slurmctld", ContainerPort: clusternames.SlurmctldPort}}
	c.VolumeMounts = []corev1.VolumeMount{mount("config", ConfigDir), mount("keys", KeysMountDir), {Name: "state", MountPath: StateSaveDir}}
	c.SecurityContext = daemonSecurity()
	// slurmctld is PID 1 of its container and reaps no child it did not start. A probe that
	// kubelet kills at its timeout leaves its `timeout scontrol ping` to slurmctld: a zombie
	// each, and a SIGCHLD that 26.05's connection manager must read (QuiesceTimeout). The probe's
	// command gives up after SUNK_READY_TIMEOUT; kubelet waits longer, so the probe ends itself.
	// (A pod sharing one PID namespace, whose pause process would reap them, was tried: its
	// backup hung right after taking over, once in one run of three e2e clusters on 2 cores.
	// Whether that was the cause was not established; see docs/slurmcluster.md.)
	c.ReadinessProbe.TimeoutSeconds = ReadyCommandTimeout + 5
	c.StartupProbe, c.LivenessProbe = controllerStartupProbe(c.ReadinessProbe), controllerLivenessProbe(c.ReadinessProbe)
	pod := corev1.PodSpec{
		ImagePullSecrets: sc.Spec.ImagePullSecrets,
		Containers:       []corev1.Container{c},
		SecurityContext:  podSecurity(),
		// Nothing in the pod talks to Kubernetes; the operator reads it from outside.
		AutomountServiceAccountToken: ptr.To(false),
		// slurmctld saves its state on SIGTERM; give it time for a large queue.
		TerminationGracePeriodSeconds: ptr.To(int64(120)),
		Volumes:                       []corev1.Volume{configMapVolume("config", n.Config, 0o444), KeysVolume(n, true)},
		DNSConfig:                     loginHostsSearch(sc, n),
	}
	withSSSD(sc, sc.Spec.Controller.Image, &pod, &pod.Containers[0])
	if sc.Spec.Controller.NodeWatcher {
		// The watcher's reader is a Slurm client: auth/slurm gives clients their token through
		// slurmctld's own socket, /run/slurmctld/sack.socket, which the two containers share.
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: slurmctldRunVolume, MountPath: SlurmctldRunDir})
		pod.Containers = append(pod.Containers, nodeWatchContainer(sc, n))
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: slurmctldRunVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			nodeWatchJWTVolume(n))
		if n.TLS {
			pod.Volumes = append(pod.Volumes, TLSVolume(n))
		}
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: meta(n, n.Controller, wellknown.ComponentController),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(Controllers(sc))),
			ServiceName:         n.Controller,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: SelectorLabels(n, wellknown.ComponentController)},
			Template:            podTemplate(n, wellknown.ComponentController, cfg.RestartHash, pod),
		},
	}
	if sc.Spec.Controller.Backup {
		// Primary and backup share one state directory: a claim of their own, not a template.
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "state", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: StateClaim(n)}}})
		sts.Spec.Template.Spec = pod
	} else {
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claimTemplate("state", sc.Spec.Controller.StateStorage, corev1.ReadWriteOnce)}
	}
	return sts
}

// NodeWatchService reaches the node watchers beside the controller pods (spec.controller.nodeWatcher)
// through a cluster IP, from inside the cluster and from a syncer outside it. ClientIP affinity
// keeps a syncer on one watcher: each has an epoch of its own, so alternating between the
// primary's and the backup's would cost a whole table per request. Both read the same table
// through whichever slurmctld is in charge, so when one pod goes, the other serves.
func NodeWatchService(n clusternames.Names) *corev1.Service {
	s := service(n, n.NodeWatch, wellknown.ComponentController, corev1.ServiceTypeClusterIP, clusternames.NodeWatchPort)
	s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	s.Spec.Ports[0].Name = NodeWatchContainer
	return s
}

// NodeWatchContainer is sunk-nodewatch's container beside slurmctld (spec.controller.nodeWatcher).
const NodeWatchContainer = "nodewatch"

// slurmctldRunVolume is the controller pod's /run/slurmctld (slurmctld's auth socket), shared
// with the node watcher.
const slurmctldRunVolume = "slurmctld-run"

// nodeWatchJWTVolume is the JWT Secret's key, and during a rotation the key it replaces, for
// the node watcher to check its readers' tokens with: not the keys volume, which holds the auth
// key too.
func nodeWatchJWTVolume(n clusternames.Names) corev1.Volume {
	return corev1.Volume{Name: nodeWatchJWTVolumeName, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: n.JWTSecret},
				Items: []corev1.KeyToPath{{Key: wellknown.SecretJWTKey, Path: wellknown.SecretJWTKey}}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: n.JWTSecret},
				Items: []corev1.KeyToPath{{Key: wellknown.SecretJWTPreviousKey, Path: wellknown.SecretJWTPreviousKey}}, Optional: ptr.To(true)}},
		},
		DefaultMode: ptr.To(int32(0o400))}}}
}

const nodeWatchJWTVolumeName = "nodewatch-jwt"

// nodeWatchContainer runs sunk-nodewatch (sunk-entrypoint nodewatch) as slurm with slurmctld's
// slurm.conf and, read-only, its auth socket (no auth key: a client gets its token from the
// socket, which vouches for the caller's uid): its reader loads the node table through Slurm's
// own library from whichever slurmctld is in charge, so the one beside the backup serves as
// well as the primary's. It answers only tokens of the cluster's JWT key naming wellknown.SlurmUser
// (pkg/nodewatch, JWTAuth): the table shows every node's address, reasons and who set them.
// No readiness probe: a watcher that cannot read Slurm answers 503, which the syncer reports,
// and must not take slurmctld's pod out of its Services. Its memory is bounded: a watcher that
// grew without end would share slurmctld's node.
// With spec.tls it serves TLS with the cluster's serving certificate.
func nodeWatchContainer(sc *sunkv1.SlurmCluster, n clusternames.Names) corev1.Container {
	c := slurmContainer(sc, NodeWatchContainer, sc.Spec.Controller.Image, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}})
	c.Args = []string{NodeWatchContainer, fmt.Sprintf("--listen=:%d", clusternames.NodeWatchPort),
		"--jwt-key=" + NodeWatchJWTDir + "/" + wellknown.SecretJWTKey, "--user=" + wellknown.SlurmUser}
	c.ReadinessProbe = nil
	c.Ports = []corev1.ContainerPort{{Name: NodeWatchContainer, ContainerPort: clusternames.NodeWatchPort}}
	c.VolumeMounts = []corev1.VolumeMount{mount("config", ConfigDir), mount(slurmctldRunVolume, SlurmctldRunDir),
		mount(nodeWatchJWTVolumeName, NodeWatchJWTDir)}
	if n.TLS {
		c.Args = append(c.Args, "--tls-cert="+TLSDir+"/"+clustertls.CertKey, "--tls-key="+TLSDir+"/"+clustertls.KeyKey)
		c.VolumeMounts = append(c.VolumeMounts, mount(tlsVolumeName, TLSDir))
	}
	c.SecurityContext = daemonSecurity()
	return c
}

// StateClaim is the shared state claim of a controller with a backup.
func StateClaim(n clusternames.Names) string { return n.Controller + "-state" }

// SharedStateClaim is the ReadWriteMany claim that primary and backup slurmctld share.
func SharedStateClaim(sc *sunkv1.SlurmCluster, n clusternames.Names) *corev1.PersistentVolumeClaim {
	pvc := claimTemplate(StateClaim(n), sc.Spec.Controller.StateStorage, corev1.ReadWriteMany)
	pvc.ObjectMeta = meta(n, StateClaim(n), wellknown.ComponentController)
	return &pvc
}

// A slurmctld that no longer answers its own ping is restarted by kubelet. Slurm 24.11.5
// (Debian trixie's) can hang for good in a reconfigure: "Attempting to reconfigure", then
// nothing, while it waits for its connection manager to go quiet (fixed upstream in 24.11.6,
// "a race condition that can cause slurmctld to hang forever when trying to shutdown or
// reconfigure"); a CI run saw it on a new cluster's second reconfigure, and the cluster, its
// NodeSets and their deletion then waited on Slurm for good. A hung backup (docs/slurmcluster.md)
// needed the same by hand. Restarting is safe: running jobs live in slurmd and slurmstepd, and
// slurmctld recovers its state from StateSaveLocation, which it writes atomically.
const (
	// ControllerLivenessPeriod × ControllerLivenessFailures seconds without an answer is a hang:
	// longer than anything slurmctld does before it answers again (a hand-back's quiesce is at
	// most 60 s, conmgr_quiesce_timeout), and a probe every 20 s costs half of readiness's runc
	// execs.
	ControllerLivenessPeriod   = 20
	ControllerLivenessFailures = 4
	// ControllerHungKillGrace (seconds) is how long kubelet waits after SIGTERM before SIGKILL
	// when the liveness probe fails: a hung slurmctld no longer reads its signals (conmgr
	// handles them), so the pod's 120 s for a state save would only prolong the outage.
	ControllerHungKillGrace = 15
	// ControllerStartupFailures × ReadinessPeriod seconds is how long a starting slurmctld may
	// take to answer (recovering a large state) before kubelet restarts it.
	ControllerStartupFailures = 60
)

// controllerStartupProbe holds the liveness probe back until slurmctld first answers.
func controllerStartupProbe(ready *corev1.Probe) *corev1.Probe {
	p := ready.DeepCopy()
	p.FailureThreshold = ControllerStartupFailures
	return p
}

// controllerLivenessProbe is the readiness probe's ping, asked less often and given up on
// only after ControllerLivenessFailures misses in a row.
func controllerLivenessProbe(ready *corev1.Probe) *corev1.Probe {
	p := ready.DeepCopy()
	p.PeriodSeconds = ControllerLivenessPeriod
	p.FailureThreshold = ControllerLivenessFailures
	p.TerminationGracePeriodSeconds = ptr.To(int64(ControllerHungKillGrace))
	return p
}
