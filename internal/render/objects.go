// Workloads of the control plane, one per component: slurmrestd, slurmdbd, the managed
// database and the login pods, with their Services (slurmctld's are in controller.go).

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

// RestAPIService is slurmrestd's Service.
func RestAPIService(n clusternames.Names) *corev1.Service {
	return service(n, n.RestAPI, wellknown.ComponentRestAPI, corev1.ServiceTypeClusterIP, clusternames.SlurmrestdPort)
}

// slurmrestd's size when the spec sets none; the reasons are on RestAPISpec's fields.
// Slurm's own, 20 threads and 124 connections, would leave users 4 threads beside the 16
// requests sunk's components may have in flight.
const (
	DefaultRestAPIThreads        = 32
	DefaultRestAPIMaxConnections = 256
)

// RestAPIDeployment runs slurmrestd.
func RestAPIDeployment(sc *sunkv1.SlurmCluster, n clusternames.Names, cfg *Config) *appsv1.Deployment {
	c := slurmContainer(sc, "slurmrestd", sc.Spec.RestAPI.Image, sc.Spec.RestAPI.Resources)
	// slurmrestd refuses to start when a plugin it loads cannot work: openapi/slurmdbd needs
	// accounting, so it is only loaded with it.
	plugins := "openapi/slurmctld"
	if sc.Spec.Accounting.Mode == sunkv1.AccountingManaged || sc.Spec.Accounting.Mode == sunkv1.AccountingExternal {
		plugins += ",openapi/slurmdbd"
	}
	c.Args = append(c.Args, "-s", plugins,
		"-t", fmt.Sprint(ptr.Deref(sc.Spec.RestAPI.Threads, DefaultRestAPIThreads)),
		"--max-connections", fmt.Sprint(ptr.Deref(sc.Spec.RestAPI.MaxConnections, DefaultRestAPIMaxConnections)))
	c.Ports = []corev1.ContainerPort{{Name: "slurmrestd", ContainerPort: clusternames.SlurmrestdPort}}
	// No keys: slurmrestd with rest_auth/jwt forwards each client's token and has no
	// identity of its own (24.11 even rejects tokens when given SLURM_SACK_KEY).
	c.VolumeMounts = []corev1.VolumeMount{mount("config", ConfigDir)}
	// KILL: s6-supervise, root, stops slurmrestd, which runs as user slurmrestd.
	c.SecurityContext = daemonSecurity("KILL")
	// slurmrestd unshares its System V IPC and file table at start (src/slurmrestd/slurmrestd.c
	// _lock_down), and dies when it cannot: the RuntimeDefault seccomp profile refuses unshare()
	// without CAP_SYS_ADMIN. The pod's own IPC namespace already isolates System V IPC, and the
	// file table is the single-threaded process's own at that point, so the seccomp profile is
	// kept and the two unshares are left out.
	c.Env = []corev1.EnvVar{{Name: "SLURMRESTD_SECURITY", Value: "disable_unshare_sysv,disable_unshare_files"}}
	pod := corev1.PodSpec{
		ImagePullSecrets:             sc.Spec.ImagePullSecrets,
		Containers:                   []corev1.Container{c},
		SecurityContext:              podSecurity(),
		AutomountServiceAccountToken: ptr.To(false),
		Volumes:                      []corev1.Volume{configMapVolume("config", n.Config, 0o444)},
	}
	if n.TLS {
		// slurmrestd speaks no TLS (docs/security.md, "TLS"): it listens on the pod's loopback
		// alone, and its terminator serves its port with the cluster's certificate.
		pod.Containers[0].Ports = nil
		pod.Containers[0].Env = append(pod.Containers[0].Env, corev1.EnvVar{Name: SlurmrestdListenEnv,
			Value: fmt.Sprintf("127.0.0.1:%d", clusternames.SlurmrestdLocalPort)})
		pod.Containers = append(pod.Containers, tlsProxyContainer(sc))
		pod.Volumes = append(pod.Volumes, TLSVolume(n))
	}
	return &appsv1.Deployment{
		ObjectMeta: meta(n, n.RestAPI, wellknown.ComponentRestAPI),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(sc.Spec.RestAPI.Replicas, 1)),
			Selector: &metav1.LabelSelector{MatchLabels: SelectorLabels(n, wellknown.ComponentRestAPI)},
			// slurmrestd reads slurm.conf only at start, but needs only what a restart applies anyway.
			Template: podTemplate(n, wellknown.ComponentRestAPI, cfg.RestartHash, pod),
		},
	}
}

// SlurmrestdListenEnv is where the image's slurmrestd role listens (sunk-entrypoint; its
// default is 0.0.0.0:6820).
const SlurmrestdListenEnv = "SUNK_SLURMRESTD_LISTEN"

// TLSProxyContainer is slurmrestd's TLS terminator's container (sunk-tlsproxy), with spec.tls.
const TLSProxyContainer = "tlsproxy"

// tlsProxyContainer serves slurmrestd's port over TLS in front of slurmrestd on the pod's
// loopback (internal/tlsproxy), as slurm, with the serving certificate alone.
func tlsProxyContainer(sc *sunkv1.SlurmCluster) corev1.Container {
	c := slurmContainer(sc, TLSProxyContainer, sc.Spec.RestAPI.Image, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}})
	c.Args = append(c.Args, fmt.Sprintf("--listen=:%d", clusternames.SlurmrestdPort),
		fmt.Sprintf("--backend=http://127.0.0.1:%d", clusternames.SlurmrestdLocalPort),
		"--cert="+TLSDir+"/"+clustertls.CertKey, "--key="+TLSDir+"/"+clustertls.KeyKey)
	c.Ports = []corev1.ContainerPort{{Name: "slurmrestd", ContainerPort: clusternames.SlurmrestdPort}}
	c.VolumeMounts = []corev1.VolumeMount{mount(tlsVolumeName, TLSDir)}
	// setpriv (the entrypoint's switch to slurm) needs SETUID and SETGID; nothing else is owned or chowned.
	c.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"SETGID", "SETUID"}},
	}
	return c
}

// TLSVolume is the serving certificate and its key from the cluster's TLS Secret, not its CA's
// key, which stays with the operator.
func TLSVolume(n clusternames.Names) corev1.Volume {
	return corev1.Volume{Name: tlsVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  n.TLSSecret,
		Items:       []corev1.KeyToPath{{Key: clustertls.CertKey, Path: clustertls.CertKey}, {Key: clustertls.KeyKey, Path: clustertls.KeyKey}},
		DefaultMode: ptr.To(int32(0o400))}}}
}

const tlsVolumeName = "tls"

// AccountingService is slurmdbd's Service (AccountingStorageHost).
func AccountingService(n clusternames.Names) *corev1.Service {
	return service(n, n.Accounting, wellknown.ComponentAccounting, corev1.ServiceTypeClusterIP, clusternames.SlurmdbdPort)
}

// AccountingStatefulSet runs slurmdbd. A StatefulSet, because slurmdbd.conf's DbdHost must
// name the pod's host name ahead of time.
func AccountingStatefulSet(sc *sunkv1.SlurmCluster, n clusternames.Names, cfg *Config, slurmdbdConfHash string) *appsv1.StatefulSet {
	c := slurmContainer(sc, "slurmdbd", sc.Spec.Accounting.Image, sc.Spec.Accounting.Resources)
	c.Ports = []corev1.ContainerPort{{Name: "slurmdbd", ContainerPort: clusternames.SlurmdbdPort}}
	c.VolumeMounts = []corev1.VolumeMount{mount("config", ConfigDir), mount("keys", KeysMountDir), mount("slurmdbd", SlurmdbdConfDir)}
	c.SecurityContext = daemonSecurity()
	pod := corev1.PodSpec{
		ImagePullSecrets:             sc.Spec.ImagePullSecrets,
		Containers:                   []corev1.Container{c},
		SecurityContext:              podSecurity(),
		AutomountServiceAccountToken: ptr.To(false),
		Volumes: []corev1.Volume{configMapVolume("config", n.Config, 0o444), KeysVolume(n, true),
			secretVolume("slurmdbd", n.SlurmdbdSecret)},
	}
	return &appsv1.StatefulSet{
		ObjectMeta: meta(n, n.Accounting, wellknown.ComponentAccounting),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(int32(1)),
			ServiceName: n.Accounting,
			Selector:    &metav1.LabelSelector{MatchLabels: SelectorLabels(n, wellknown.ComponentAccounting)},
			Template:    podTemplate(n, wellknown.ComponentAccounting, slurmdbdConfHash, pod),
		},
	}
}

// DatabaseService is the managed MariaDB's Service.
func DatabaseService(n clusternames.Names) *corev1.Service {
	return service(n, n.Database, wellknown.ComponentDatabase, corev1.ServiceTypeClusterIP, clusternames.MariaDBPort)
}

// DatabaseStatefulSet runs the managed MariaDB from the Slurm image (sunk-entrypoint mariadb).
func DatabaseStatefulSet(sc *sunkv1.SlurmCluster, n clusternames.Names) *appsv1.StatefulSet {
	c := slurmContainer(sc, "mariadb", sc.Spec.Accounting.Image, sc.Spec.Accounting.DatabaseResources)
	c.Ports = []corev1.ContainerPort{{Name: "mariadb", ContainerPort: clusternames.MariaDBPort}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: MariaDBDataDir}}
	secretEnv := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: n.DatabaseSecret}, Key: key}}}
	}
	c.Env = []corev1.EnvVar{
		{Name: "MARIADB_DATABASE", Value: ManagedDatabaseName},
		{Name: "MARIADB_USER", Value: ManagedDatabaseUser},
		secretEnv("MARIADB_PASSWORD", DBPasswordKey),
	}
	c.SecurityContext = daemonSecurity()
	pod := corev1.PodSpec{
		ImagePullSecrets: sc.Spec.ImagePullSecrets,
		Containers:       []corev1.Container{c},
		// No fsGroup: the data volume belongs to mysql, which the entrypoint sees to.
		SecurityContext:              &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		AutomountServiceAccountToken: ptr.To(false),
	}
	return &appsv1.StatefulSet{
		ObjectMeta: meta(n, n.Database, wellknown.ComponentDatabase),
		Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr.To(int32(1)),
			ServiceName:          n.Database,
			Selector:             &metav1.LabelSelector{MatchLabels: SelectorLabels(n, wellknown.ComponentDatabase)},
			Template:             podTemplate(n, wellknown.ComponentDatabase, "", pod),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{claimTemplate("data", sc.Spec.Accounting.DatabaseStorage, corev1.ReadWriteOnce)},
		},
	}
}

// SharedVolumeMounts are the volumes and mounts of the cluster's shared PVCs.
func SharedVolumeMounts(shared []sunkv1.SharedVolume) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, s := range shared {
		vols = append(vols, corev1.Volume{Name: "shared-" + s.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.ClaimName, ReadOnly: s.ReadOnly}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "shared-" + s.Name, MountPath: s.MountPath, ReadOnly: s.ReadOnly})
	}
	return vols, mounts
}

// ConfigMaps of the rendered configuration.
func ConfigMaps(n clusternames.Names, cfg *Config) []*corev1.ConfigMap {
	return []*corev1.ConfigMap{
		{ObjectMeta: meta(n, n.Config, wellknown.ComponentController), Data: cfg.Files},
		{ObjectMeta: meta(n, n.Scripts, wellknown.ComponentController), Data: cfg.Scripts},
	}
}

// ScriptsVolume mounts the prolog/epilog scripts, executable, at ScriptsDir (compute pods).
func ScriptsVolume(n clusternames.Names) (corev1.Volume, corev1.VolumeMount) {
	return configMapVolume("scripts", n.Scripts, 0o755), mount("scripts", ScriptsDir)
}
