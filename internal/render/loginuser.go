// The pods of PerUser login pools (spec.login.pools): one StatefulSet, Service and Secret per
// directory user, whose login container runs as that user from its first process on.

package render

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/directory"
	"sunk.dev/sunk/pkg/wellknown"
)

// Where a per-user login pod keeps what its init container prepares (sunk-entrypoint
// login-user setup): the user's passwd and group files and sshd's files.
const (
	LoginUserSetupContainer = "setup"
	loginUserSecretDir      = "/etc/sunk/login-user"
	loginUserOutDir         = "/run/sunk-user"
	loginUserSSHDir         = "/etc/sunk/user-ssh"
	loginUserVolume         = "user"
	// LoginUserAuthorizedKeys is the key of a user's Secret that holds their keys from the
	// directory (sshPublicKey), one per line; SSHHostKeyName holds their pod's host key.
	LoginUserAuthorizedKeys = "authorized_keys"
)

// MinLoginUID is the lowest uid a per-user login pod runs as: below it are the system's
// users (root, slurm, daemons), whom a directory entry must not become (Debian's FIRST_UID).
const MinLoginUID = 1000

// CheckLoginUser says why a directory user cannot have a login pod, or nil. The entrypoint
// writes their name, home and shell into passwd lines and their groups into a word list.
func CheckLoginUser(u directory.User) error {
	bad := func(s string) bool { return s == "" || strings.ContainsAny(s, ": \t\n,") }
	switch {
	case bad(u.Name):
		return fmt.Errorf("user name %q: empty, or has ':', ',' or white space", u.Name)
	case u.UID < MinLoginUID:
		return fmt.Errorf("user %s: uidNumber %d is below %d, a system user's", u.Name, u.UID, MinLoginUID)
	case u.GID < MinLoginUID:
		return fmt.Errorf("user %s: gidNumber %d is below %d, a system group's", u.Name, u.GID, MinLoginUID)
	case bad(u.Home) || !strings.HasPrefix(u.Home, "/"):
		return fmt.Errorf("user %s: homeDirectory %q is not an absolute path without ':' or white space", u.Name, u.Home)
	case bad(u.Shell) || !strings.HasPrefix(u.Shell, "/"):
		return fmt.Errorf("user %s: loginShell %q is not an absolute path without ':' or white space", u.Name, u.Shell)
	}
	for _, g := range u.Groups {
		if bad(g.Name) {
			return fmt.Errorf("user %s: group name %q: empty, or has ':', ',' or white space", u.Name, g.Name)
		}
		if g.GID < MinLoginUID {
			return fmt.Errorf("user %s: group %s: gidNumber %d is below %d, a system group's", u.Name, g.Name, g.GID, MinLoginUID)
		}
	}
	return nil
}

// LoginUserSelector selects the pod of one user of a pool.
func LoginUserSelector(n clusternames.Names, pool, user string) map[string]string {
	l := SelectorLabels(n, wellknown.ComponentLoginUser)
	l[wellknown.LabelLoginPool] = pool
	l[wellknown.LabelLoginUser] = clusternames.LoginUserSlug(user, 63)
	return l
}

func loginUserMeta(n clusternames.Names, pool, user string) metav1.ObjectMeta {
	m := meta(n, n.LoginUser(pool, user), wellknown.ComponentLoginUser)
	for k, v := range LoginUserSelector(n, pool, user) {
		m.Labels[k] = v
	}
	m.Annotations = map[string]string{wellknown.AnnotationLoginUser: user}
	return m
}

// LoginUserHostsService is the per-user login pods' headless Service: their hostnames, which
// srun reports to slurmctld, resolve through it (LoginHostsService says why that matters).
func LoginUserHostsService(n clusternames.Names) *corev1.Service {
	return headlessService(n, n.LoginUserHosts, wellknown.ComponentLoginUser, clusternames.LoginUserSSHPort)
}

// LoginUserService is how a user reaches their pod: port 22 of <cluster>-login-<pool>-<user>.
func LoginUserService(n clusternames.Names, pool sunkv1.LoginPool, user string) *corev1.Service {
	return poolSSHService(loginUserMeta(n, pool.Name, user), LoginUserSelector(n, pool.Name, user), pool, clusternames.LoginUserSSHPort)
}

// LoginUserSecret holds a user's pod's host key, made once by the operator, and their keys
// from the directory.
func LoginUserSecret(n clusternames.Names, pool string, u directory.User, hostKey []byte) *corev1.Secret {
	keys := strings.Join(u.SSHKeys, "\n")
	if keys != "" {
		keys += "\n"
	}
	return &corev1.Secret{
		ObjectMeta: loginUserMeta(n, pool, u.Name),
		Data:       map[string][]byte{SSHHostKeyName: hostKey, LoginUserAuthorizedKeys: []byte(keys)},
	}
}

// LoginUserStatefulSet runs one user's login pod. Its login container runs as the user, with no
// capability and no privilege escalation: sshd (non-root, port 2222) lets only them in, and
// nothing in it can become root or sign for anyone else, since sackd, in its own container,
// signs for the uid of whoever connects to its socket (SO_PEERCRED, src/plugins/auth/slurm/sack.c).
// An init container, root, writes what root must: the user's passwd and group entries, sshd's
// files owned by the user, their home's owner (sunk-entrypoint login-user setup). A
// StatefulSet of one, for the stable hostname srun needs.
func LoginUserStatefulSet(sc *sunkv1.SlurmCluster, n clusternames.Names, pool sunkv1.LoginPool, u directory.User) *appsv1.StatefulSet {
	image := poolImage(sc, pool)
	var groups []string
	supplemental := []int64{}
	for _, g := range u.Groups {
		groups = append(groups, g.Name+":"+strconv.FormatInt(g.GID, 10))
		if g.GID != u.GID {
			supplemental = append(supplemental, g.GID)
		}
	}
	env := []corev1.EnvVar{
		{Name: "SUNK_LOGIN_USER", Value: u.Name},
		{Name: "SUNK_LOGIN_UID", Value: strconv.FormatInt(u.UID, 10)},
		{Name: "SUNK_LOGIN_GID", Value: strconv.FormatInt(u.GID, 10)},
		{Name: "SUNK_LOGIN_HOME", Value: u.Home},
		{Name: "SUNK_LOGIN_SHELL", Value: u.Shell},
		{Name: "SUNK_LOGIN_GROUPS", Value: strings.Join(groups, " ")},
	}
	setup := slurmContainer(sc, "login-user", image, corev1.ResourceRequirements{})
	setup.Name, setup.Args = LoginUserSetupContainer, []string{"login-user", "setup"}
	setup.ReadinessProbe = nil
	setup.SecurityContext = daemonSecurity()
	setup.VolumeMounts = []corev1.VolumeMount{mount("user-secret", loginUserSecretDir),
		{Name: loginUserVolume, MountPath: loginUserOutDir}}

	login := slurmContainer(sc, "login-user", image, pool.Resources)
	login.Name = LoginContainer
	login.Ports = []corev1.ContainerPort{{Name: "ssh", ContainerPort: clusternames.LoginUserSSHPort}}
	login.SecurityContext = &corev1.SecurityContext{
		RunAsUser: ptr.To(u.UID), RunAsGroup: ptr.To(u.GID), RunAsNonRoot: ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	login.VolumeMounts = []corev1.VolumeMount{
		{Name: loginUserVolume, MountPath: "/etc/passwd", SubPath: "etc/passwd", ReadOnly: true},
		{Name: loginUserVolume, MountPath: "/etc/group", SubPath: "etc/group", ReadOnly: true},
		{Name: loginUserVolume, MountPath: loginUserSSHDir, SubPath: "ssh", ReadOnly: true},
		// Read-only, as in the shared login pods: connecting to sackd's socket needs no more.
		mount(slurmRunVolume, SlurmRunDir),
	}
	vols := []corev1.Volume{KeysVolume(n, false),
		{Name: slurmRunVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: loginUserVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		secretVolume("user-secret", n.LoginUser(pool.Name, u.Name)),
	}
	var claims []corev1.PersistentVolumeClaim
	if pool.Home != nil {
		claims = []corev1.PersistentVolumeClaim{claimTemplate("home", *pool.Home, corev1.ReadWriteOnce)}
		home := corev1.VolumeMount{Name: "home", MountPath: u.Home}
		login.VolumeMounts = append(login.VolumeMounts, home)
		setup.VolumeMounts = append(setup.VolumeMounts, home)
		setup.Env = append(env, corev1.EnvVar{Name: "SUNK_LOGIN_HOME_VOLUME", Value: "true"})
	} else {
		setup.Env = env
	}
	sv, sm := SharedVolumeMounts(sc.Spec.SharedVolumes)
	vols, login.VolumeMounts = append(vols, sv...), append(login.VolumeMounts, sm...)

	sackd := sackdContainer(sc, n)
	sackd.Image = imageOf(sc, image)
	ps := podSecurity()
	ps.SupplementalGroups = supplemental
	m := loginUserMeta(n, pool.Name, u.Name)
	tmpl := podTemplate(n, wellknown.ComponentLoginUser, "", corev1.PodSpec{
		ImagePullSecrets: sc.Spec.ImagePullSecrets,
		InitContainers:   []corev1.Container{setup},
		// login first: the container kubectl exec picks by default.
		Containers:      []corev1.Container{login, sackd},
		SecurityContext: ps,
		// Nothing of the API for the user to read, and no Service variables either.
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		NodeSelector:                 pool.NodeSelector,
		Tolerations:                  pool.Tolerations,
		Volumes:                      vols,
	})
	for k, v := range m.Labels {
		tmpl.Labels[k] = v
	}
	tmpl.Annotations = m.Annotations
	return &appsv1.StatefulSet{
		ObjectMeta: m,
		Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr.To(int32(1)),
			ServiceName:          n.LoginUserHosts,
			Selector:             &metav1.LabelSelector{MatchLabels: LoginUserSelector(n, pool.Name, u.Name)},
			Template:             tmpl,
			VolumeClaimTemplates: claims,
		},
	}
}
