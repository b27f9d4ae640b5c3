// SSSD beside slurmctld and slurmd: users and groups from LDAP where Slurm looks them up.

package render

import (
	corev1 "k8s.io/api/core/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// Where SSSD's NSS responder listens (libnss_sss connects to SSSPipesDir/nss), and the
// controller pod's SSSD container.
const (
	SSSPipesDir   = "/var/lib/sss/pipes"
	SSSDContainer = "sssd"
	sssPipes      = "sss-pipes"
	// sssdVolume is the volume of sssd.conf's Secret, in login, controller and compute pods.
	sssdVolume = "sssd"
)

// withSSSD gives the controller pod the login pods' SSSD when spec.login.sssdConfigSecretRef is
// set. slurmctld itself resolves each job's user and groups: it puts them in the job's
// credential (Slurm's default send_gids) and fails the launch of a job whose uid it cannot
// resolve ("cred_create: fetch_identity() failed"), so LDAP users on login and compute pods
// alone cannot run a job. SSSD runs in a container of its own (sunk-entrypoint login without
// sshd runs only SSSD under s6, as in a login pod), and slurmctld's libnss_sss reaches it
// through its pipes directory, an emptyDir both mount; slurmctld's container keeps its
// capabilities and gets no LDAP configuration.
//
// Compute pods get the same container (computeSSSD), from their NodeSet's image, and slurmd's
// container the pipes directory (read-only, as slurmctld's): slurmd, slurmstepd and the jobs,
// which run in slurmd's container, resolve LDAP users through it, and a job cannot swap the
// socket.
func withSSSD(sc *sunkv1.SlurmCluster, image sunkv1.Image, pod *corev1.PodSpec, daemon *corev1.Container) {
	ref := sc.Spec.Login.SSSDConfigSecretRef
	if ref == nil {
		return
	}
	s := slurmContainer(sc, SSSDContainer, image, corev1.ResourceRequirements{})
	// The emptyDir is not the image's pipes directory: it lacks private/, where sssd's monitor
	// binds its bus and which sssd does not make, and fsGroup made it setgid slurm, so what
	// sssd makes in it would be slurm's group, which sssd's check of its bus socket refuses
	// (both "Unable to start a D-Bus server": sssd stops). Made as the image has them.
	d := SSSPipesDir
	s.Command = []string{"/bin/sh", "-c", "chown 0:0 " + d + " && chmod 0755 " + d + " && chmod g-s " + d +
		" && install -d -m 0700 " + d + "/private && exec /usr/local/sbin/sunk-entrypoint login"}
	s.Args = nil
	s.Env = []corev1.EnvVar{{Name: "SUNK_SSHD", Value: "false"}}
	s.ReadinessProbe.Exec.Command = []string{"test", "-S", SSSPipesDir + "/nss"}
	s.VolumeMounts = []corev1.VolumeMount{mount(sssdVolume, SSSDConfDir), {Name: sssPipes, MountPath: SSSPipesDir}}
	// sssd starts as root and switches its children to its own user.
	s.SecurityContext = daemonSecurity("KILL")
	// Connecting to a socket needs no write access to the file system it is on.
	daemon.VolumeMounts = append(daemon.VolumeMounts, mount(sssPipes, SSSPipesDir))
	pod.Containers = append(pod.Containers, s)
	pod.Volumes = append(pod.Volumes, secretVolume(sssdVolume, ref.Name),
		corev1.Volume{Name: sssPipes, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
}

// computeSSSD gives a compute pod SSSD (withSSSD) unless its NodeSet sets SSSD up itself: an s6
// service named sssd, or a volume of one of withSSSD's names (what docs/user-guide.md told
// admins to write before compute pods had it). Two SSSDs would share one pipes directory, two
// volumes of one name make no pod, and such a NodeSet keeps its pods as they were.
func computeSSSD(ns *sunkv1.NodeSet, sc *sunkv1.SlurmCluster, pod *corev1.PodSpec, slurmd *corev1.Container) {
	for _, s := range ns.Spec.Services {
		if s.Name == SSSDContainer {
			return
		}
	}
	for _, v := range ns.Spec.Volumes {
		if v.Name == sssdVolume || v.Name == sssPipes {
			return
		}
	}
	withSSSD(sc, ns.Spec.Image, pod, slurmd)
}
