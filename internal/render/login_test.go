package render

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
)

// TestLoginContainerHoldsNoKey: in a login pod only the sackd container, which nobody logs into,
// mounts the keys; users' container shares with it only /run/slurm, read-only, and cannot see
// its processes (issue 21, docs/security.md).
func TestLoginContainerHoldsNoKey(t *testing.T) {
	for name, sc := range map[string]func() *sunkv1.SlurmCluster{"minimal": minimal, "full": full} {
		sc := sc()
		n := clusternames.For(sc, "")
		c, err := RenderConfig(sc, ConfigInputs{Names: n})
		if err != nil {
			t.Fatal(err)
		}
		spec := LoginStatefulSet(sc, n, c).Spec.Template.Spec
		if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace {
			t.Errorf("%s: the login pod shares its process namespace: the login container would see sackd's key in /proc", name)
		}
		if spec.Containers[0].Name != LoginContainer {
			t.Errorf("%s: the first container is %s, want %s (kubectl exec's default)", name, spec.Containers[0].Name, LoginContainer)
		}
		mounts := map[string][]corev1.VolumeMount{}
		for _, ctr := range spec.Containers {
			mounts[ctr.Name] = ctr.VolumeMounts
		}
		has := func(ctr, volume string) (corev1.VolumeMount, bool) {
			i := slices.IndexFunc(mounts[ctr], func(m corev1.VolumeMount) bool { return m.Name == volume })
			if i < 0 {
				return corev1.VolumeMount{}, false
			}
			return mounts[ctr][i], true
		}
		for ctr := range mounts {
			if _, ok := has(ctr, "keys"); ok != (ctr == SackdContainer) {
				t.Errorf("%s: container %s mounts the keys: %v", name, ctr, ok)
			}
		}
		if m, ok := has(LoginContainer, slurmRunVolume); !ok || !m.ReadOnly || m.MountPath != SlurmRunDir {
			t.Errorf("%s: login container's %s mount: %+v (present %v), want read-only at %s", name, slurmRunVolume, m, ok, SlurmRunDir)
		}
		if m, ok := has(SackdContainer, slurmRunVolume); !ok || m.ReadOnly || m.MountPath != SlurmRunDir {
			t.Errorf("%s: sackd container's %s mount: %+v (present %v), want read-write at %s", name, slurmRunVolume, m, ok, SlurmRunDir)
		}
		for _, v := range spec.Volumes {
			if v.Name == slurmRunVolume && v.EmptyDir == nil {
				t.Errorf("%s: %s is not an emptyDir: %+v", name, slurmRunVolume, v.VolumeSource)
			}
			if v.Name == "keys" {
				for _, src := range v.Projected.Sources {
					if src.Secret == nil || src.Secret.Name != n.AuthSecret {
						t.Errorf("%s: the login pod's keys volume projects %+v, want the auth Secret alone (slurm.key, slurm.jwks)", name, src)
					}
				}
			}
		}
		for _, ctr := range spec.Containers {
			for _, e := range ctr.Env {
				if e.Name == "SLURM_SACK_KEY" {
					t.Errorf("%s: container %s sets SLURM_SACK_KEY", name, ctr.Name)
				}
			}
		}
	}
}

// TestRootLoginOptIn: sshd lets root in only when the spec says so (the image's default is no).
func TestRootLoginOptIn(t *testing.T) {
	permits := func(sc *sunkv1.SlurmCluster) bool {
		n := clusternames.For(sc, "")
		c, err := RenderConfig(sc, ConfigInputs{Names: n})
		if err != nil {
			t.Fatal(err)
		}
		login := LoginStatefulSet(sc, n, c).Spec.Template.Spec.Containers[0]
		return slices.Contains(login.Env, corev1.EnvVar{Name: "SUNK_SSH_PERMIT_ROOT_LOGIN", Value: "true"})
	}
	sc := full() // root's authorized keys, no opt-in
	if permits(sc) {
		t.Error("root may log in without spec.login.ssh.permitRootLogin")
	}
	sc.Spec.Login.SSH.PermitRootLogin = true
	if !permits(sc) {
		t.Error("spec.login.ssh.permitRootLogin does not reach the login container")
	}
}
