// The login pods: the shared ones (spec.login) and a Group login pool's, their Services, and
// the sackd container that holds the key beside the container users log in to.

package render

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// LoginService exposes sshd of the login pods.
func LoginService(sc *sunkv1.SlurmCluster, n clusternames.Names) *corev1.Service {
	typ := sc.Spec.Login.SSH.ServiceType
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	}
	return service(n, n.Login, wellknown.ComponentLogin, typ, clusternames.SSHPort)
}

// SSHEnabled says whether login pods run sshd.
func SSHEnabled(sc *sunkv1.SlurmCluster) bool { return ptr.Deref(sc.Spec.Login.SSH.Enabled, true) }

// LoginHostsService is the login pods' headless Service. srun tells slurmctld its short
// hostname (src/srun/launch.c: step_req->host = xshort_hostname()), and slurmctld resolves it
// whenever it messages srun about a step (src/stepmgr/srun_comm.c _srun_set_addr), holding its
// job and node locks. A Deployment's pod names resolve nowhere, and Debian's Slurm retries a
// failed getaddrinfo ten times a second apart: every `srun` from a login pod took 10 s and
// stalled every other RPC, GET /nodes included, for as long. With this Service and the
// StatefulSet's stable hostnames, "<login>-0" resolves through the search domain slurmctld's
// pods get (loginHostsSearch).
func LoginHostsService(n clusternames.Names) *corev1.Service {
	return headlessService(n, n.LoginHosts, wellknown.ComponentLogin, clusternames.SSHPort)
}

// loginHostsSearch adds the login pods' domain to a pod's DNS search list, so that a login
// pod's short hostname, as srun reports it, resolves there; with login pools of a type, their
// pods' domain too (only then: a new search entry restarts slurmctld).
func loginHostsSearch(sc *sunkv1.SlurmCluster, n clusternames.Names) *corev1.PodDNSConfig {
	searches := []string{n.ServiceHost(n.LoginHosts)}
	if HasLoginPools(sc, sunkv1.LoginPoolPerUser) {
		searches = append(searches, n.ServiceHost(n.LoginUserHosts))
	}
	if HasLoginPools(sc, sunkv1.LoginPoolGroup) {
		searches = append(searches, n.ServiceHost(n.LoginGroupHosts))
	}
	return &corev1.PodDNSConfig{Searches: searches}
}

// HasLoginPools says whether spec.login.pools has a pool of type typ (PerUser when unset).
func HasLoginPools(sc *sunkv1.SlurmCluster, typ sunkv1.LoginPoolType) bool {
	for _, p := range sc.Spec.Login.Pools {
		if PoolType(p) == typ {
			return true
		}
	}
	return false
}

// PoolType is a pool's type: PerUser unless it says otherwise (the API's default).
func PoolType(p sunkv1.LoginPool) sunkv1.LoginPoolType {
	if p.Type == "" {
		return sunkv1.LoginPoolPerUser
	}
	return p.Type
}

// Containers of a login pod: users log in to LoginContainer; SackdContainer holds slurm.key.
const (
	LoginContainer = "login"
	SackdContainer = "sackd"
)

// LoginStatefulSet runs the login pods. Users log in to the login container (sshd, optional
// SSSD, the user's s6 services, supervised by s6), which holds no key: sackd, the one process of
// the pod that signs with slurm.key, runs in a container of its own that nobody logs into, and
// shares with it only /run/slurm, its socket and configless cache (docs/security.md). A
// StatefulSet, not a Deployment, for the stable hostnames srun needs (LoginHostsService).
func LoginStatefulSet(sc *sunkv1.SlurmCluster, n clusternames.Names, cfg *Config) *appsv1.StatefulSet {
	l := sc.Spec.Login
	return loginStatefulSet(sc, n, loginShape{
		meta: meta(n, n.Login, wellknown.ComponentLogin), selector: SelectorLabels(n, wellknown.ComponentLogin),
		replicas: ptr.Deref(l.Replicas, 1), image: l.Image, resources: l.Resources, serviceName: n.LoginHosts,
	})
}

// LoginGroupStatefulSet runs a Group login pool's pods: the shared login pods' kind, with the
// pool's replicas, resources and placement, and an sshd that lets in only the members of the
// pool's group (AllowGroups, through the pod's SSSD).
func LoginGroupStatefulSet(sc *sunkv1.SlurmCluster, n clusternames.Names, pool sunkv1.LoginPool) *appsv1.StatefulSet {
	image := poolImage(sc, pool)
	return loginStatefulSet(sc, n, loginShape{
		meta: loginGroupMeta(n, pool.Name), selector: LoginGroupSelector(n, pool.Name),
		replicas: ptr.Deref(pool.Replicas, 1), image: image, resources: pool.Resources, serviceName: n.LoginGroupHosts,
		nodeSelector: pool.NodeSelector, tolerations: pool.Tolerations, allowGroup: pool.Group,
	})
}

// LoginGroupSelector selects a Group login pool's pods.
func LoginGroupSelector(n clusternames.Names, pool string) map[string]string {
	l := SelectorLabels(n, wellknown.ComponentLoginGroup)
	l[wellknown.LabelLoginPool] = pool
	return l
}

func loginGroupMeta(n clusternames.Names, pool string) metav1.ObjectMeta {
	m := meta(n, n.LoginGroup(pool), wellknown.ComponentLoginGroup)
	m.Labels[wellknown.LabelLoginPool] = pool
	return m
}

// LoginGroupService is how a Group login pool's members reach its pods: port 22 of
// <cluster>-login-<pool>, of the pool's serviceType.
func LoginGroupService(n clusternames.Names, pool sunkv1.LoginPool) *corev1.Service {
	return poolSSHService(loginGroupMeta(n, pool.Name), LoginGroupSelector(n, pool.Name), pool, clusternames.SSHPort)
}

// poolSSHService is a login pool's SSH Service: port 22 to sshd's port, of the pool's type.
func poolSSHService(m metav1.ObjectMeta, selector map[string]string, pool sunkv1.LoginPool, sshdPort int32) *corev1.Service {
	typ := pool.ServiceType
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	}
	return &corev1.Service{
		ObjectMeta: m,
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: selector,
			Ports:    []corev1.ServicePort{{Name: "ssh", Port: clusternames.SSHPort, TargetPort: intstr.FromInt32(sshdPort)}},
		},
	}
}

// poolImage is a pool's image: its own, else spec.login.image (else spec.image, imageOf).
func poolImage(sc *sunkv1.SlurmCluster, pool sunkv1.LoginPool) sunkv1.Image {
	if pool.Image != "" {
		return pool.Image
	}
	return sc.Spec.Login.Image
}

// LoginGroupHostsService is the Group login pools' pods' headless Service (LoginHostsService
// says why their hostnames must resolve).
func LoginGroupHostsService(n clusternames.Names) *corev1.Service {
	return headlessService(n, n.LoginGroupHosts, wellknown.ComponentLoginGroup, clusternames.SSHPort)
}

// loginShape is what tells a set of shared-kind login pods (spec.login's, a Group pool's) apart.
type loginShape struct {
	meta         metav1.ObjectMeta
	selector     map[string]string
	replicas     int32
	image        sunkv1.Image
	resources    corev1.ResourceRequirements
	serviceName  string
	nodeSelector map[string]string
	tolerations  []corev1.Toleration
	// allowGroup, when set, is the only group whose members sshd lets in.
	allowGroup string
}

func loginStatefulSet(sc *sunkv1.SlurmCluster, n clusternames.Names, shape loginShape) *appsv1.StatefulSet {
	l := sc.Spec.Login
	c := slurmContainer(sc, LoginContainer, shape.image, shape.resources)
	if !SSHEnabled(sc) {
		c.Env = append(c.Env, corev1.EnvVar{Name: "SUNK_SSHD", Value: "false"})
	} else {
		c.Ports = []corev1.ContainerPort{{Name: "ssh", ContainerPort: clusternames.SSHPort}}
		c.VolumeMounts = append(c.VolumeMounts, mount("ssh-host-key", SSHHostKeysDir))
		if l.SSH.PermitRootLogin {
			c.Env = append(c.Env, corev1.EnvVar{Name: "SUNK_SSH_PERMIT_ROOT_LOGIN", Value: "true"})
		}
		if shape.allowGroup != "" {
			c.Env = append(c.Env, corev1.EnvVar{Name: "SUNK_SSH_ALLOW_GROUPS", Value: shape.allowGroup})
		}
	}
	// Read-only: root here could otherwise swap the socket or the slurm.conf every user's
	// commands trust. Connecting to a socket needs no write access to its file system.
	c.VolumeMounts = append(c.VolumeMounts, mount(slurmRunVolume, SlurmRunDir))
	vols := []corev1.Volume{KeysVolume(n, false),
		{Name: slurmRunVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	if SSHEnabled(sc) {
		vols = append(vols, secretVolume("ssh-host-key", n.SSHHostKeySecret))
	}
	if ref := l.SSH.AuthorizedKeysSecretRef; ref != nil {
		vols = append(vols, secretVolume("ssh", ref.Name))
		c.VolumeMounts = append(c.VolumeMounts, mount("ssh", SSHKeysDir))
	}
	if ref := l.SSSDConfigSecretRef; ref != nil {
		vols = append(vols, secretVolume(sssdVolume, ref.Name))
		c.VolumeMounts = append(c.VolumeMounts, mount(sssdVolume, SSSDConfDir))
	}
	if v, ok := S6ServicesVolume("services", n.LoginServices, l.Services); ok {
		vols = append(vols, v)
		c.VolumeMounts = append(c.VolumeMounts, mount("services", S6ServicesDir))
	}
	sv, sm := SharedVolumeMounts(sc.Spec.SharedVolumes)
	vols, c.VolumeMounts = append(vols, sv...), append(c.VolumeMounts, sm...)
	c.SecurityContext = loginSecurity()
	sackd := sackdContainer(sc, n)
	sackd.Image = imageOf(sc, shape.image)
	pod := corev1.PodSpec{
		ImagePullSecrets: sc.Spec.ImagePullSecrets,
		// login first: the container kubectl exec picks by default.
		Containers:      append([]corev1.Container{c, sackd}, l.Sidecars...),
		SecurityContext: podSecurity(),
		// Users log in here: a token in the pod would be theirs to read. A sidecar that needs
		// the API mounts a projected token of its own.
		AutomountServiceAccountToken: ptr.To(false),
		NodeSelector:                 shape.nodeSelector,
		Tolerations:                  shape.tolerations,
		Volumes:                      vols,
	}
	tmpl := podTemplate(n, shape.meta.Labels[wellknown.LabelComponent], S6ServicesHash(l.Services), pod)
	for k, v := range shape.selector {
		tmpl.Labels[k] = v
	}
	return &appsv1.StatefulSet{
		ObjectMeta: shape.meta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(shape.replicas),
			ServiceName:         shape.serviceName,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: shape.selector},
			Template:            tmpl,
		},
	}
}

// slurmRunVolume is the login pod's /run/slurm, the one directory its two containers share.
const slurmRunVolume = "slurm-run"

// sackdContainer runs sackd (sunk-entrypoint sackd) with the auth key. It needs what the other
// daemons need, plus KILL: s6-supervise, root, stops sackd, which runs as slurm. Its processes
// are invisible to the login container (the pod does not share its process namespace).
func sackdContainer(sc *sunkv1.SlurmCluster, n clusternames.Names) corev1.Container {
	s := slurmContainer(sc, SackdContainer, sc.Spec.Login.Image, corev1.ResourceRequirements{})
	s.Env = []corev1.EnvVar{{Name: "SLURM_CONF_SERVER", Value: n.ConfServer(Controllers(sc))}}
	s.VolumeMounts = []corev1.VolumeMount{mount("keys", KeysMountDir), {Name: slurmRunVolume, MountPath: SlurmRunDir}}
	s.SecurityContext = daemonSecurity("KILL")
	return s
}
