package render

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/directory"
)

var ada = directory.User{Name: "ada", UID: 5001, GID: 5001, Home: "/home/ada", Shell: "/bin/bash",
	Groups:  []directory.Group{{Name: "ada", GID: 5001}, {Name: "researchers", GID: 6000}},
	SSHKeys: []string{"ssh-ed25519 AAAA ada@laptop"}}

// TestLoginUserPodRunsAsTheUser: in a per-user login pod, the container users log in to runs as
// the user with nothing that leads back to root (no capability, no privilege escalation, no
// key, no token, no Service variables); only the init container is root, and it mounts no key.
func TestLoginUserPodRunsAsTheUser(t *testing.T) {
	sc := full()
	sc.Spec.Login.Pools = []sunkv1.LoginPool{{Name: "users", Group: "researchers",
		Home: &sunkv1.StorageSpec{Size: ptr.To(resource.MustParse("5Gi"))}}}
	n := clusternames.For(sc, "")
	sts := LoginUserStatefulSet(sc, n, sc.Spec.Login.Pools[0], ada)
	spec := sts.Spec.Template.Spec
	if want := sc.Name + "-login-users-ada"; sts.Name != want {
		t.Errorf("name %s, want %s", sts.Name, want)
	}
	if spec.Containers[0].Name != LoginContainer {
		t.Fatalf("first container %s, want %s", spec.Containers[0].Name, LoginContainer)
	}
	login := spec.Containers[0]
	s := login.SecurityContext
	if s == nil || ptr.Deref(s.RunAsUser, 0) != 5001 || ptr.Deref(s.RunAsGroup, 0) != 5001 || !ptr.Deref(s.RunAsNonRoot, false) ||
		ptr.Deref(s.AllowPrivilegeEscalation, true) || s.Capabilities == nil || len(s.Capabilities.Add) != 0 ||
		len(s.Capabilities.Drop) != 1 || s.Capabilities.Drop[0] != "ALL" || ptr.Deref(s.Privileged, false) {
		t.Errorf("login container security %+v: want uid/gid 5001, non-root, no escalation, every capability dropped", s)
	}
	if ptr.Deref(spec.AutomountServiceAccountToken, true) || ptr.Deref(spec.EnableServiceLinks, true) {
		t.Errorf("token %v, service links %v: want neither", spec.AutomountServiceAccountToken, spec.EnableServiceLinks)
	}
	if ptr.Deref(spec.ShareProcessNamespace, false) || spec.HostPID || spec.HostNetwork || spec.HostIPC {
		t.Errorf("the pod shares a namespace: %+v", spec)
	}
	if got := spec.SecurityContext.SupplementalGroups; len(got) != 1 || got[0] != 6000 {
		t.Errorf("supplemental groups %v, want [6000] (researchers; 5001 is the primary)", got)
	}
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.Name == "keys" && c.Name != SackdContainer {
				t.Errorf("container %s mounts the keys", c.Name)
			}
			if m.Name == "user-secret" && c.Name != LoginUserSetupContainer {
				t.Errorf("container %s mounts the user's Secret", c.Name)
			}
			if c.Name == LoginContainer && !m.ReadOnly && m.Name != "home" && !strings.HasPrefix(m.Name, "shared-") {
				t.Errorf("login container mounts %s at %s writable", m.Name, m.MountPath)
			}
		}
	}
	mounts := map[string]string{}
	for _, m := range login.VolumeMounts {
		mounts[m.MountPath] = m.Name + "/" + m.SubPath
	}
	for path, want := range map[string]string{"/etc/passwd": "user/etc/passwd", "/etc/group": "user/etc/group",
		"/etc/sunk/user-ssh": "user/ssh", "/home/ada": "home/", SlurmRunDir: slurmRunVolume + "/"} {
		if mounts[path] != want {
			t.Errorf("login container's %s: %q, want %q", path, mounts[path], want)
		}
	}
	env := map[string]string{}
	for _, e := range spec.InitContainers[0].Env {
		env[e.Name] = e.Value
	}
	if env["SUNK_LOGIN_GROUPS"] != "ada:5001 researchers:6000" || env["SUNK_LOGIN_HOME_VOLUME"] != "true" || env["SUNK_LOGIN_UID"] != "5001" {
		t.Errorf("setup environment %v", env)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.ServiceName != n.LoginUserHosts {
		t.Errorf("claims %d, serviceName %s", len(sts.Spec.VolumeClaimTemplates), sts.Spec.ServiceName)
	}
	svc := LoginUserService(n, sc.Spec.Login.Pools[0], "ada")
	if svc.Spec.Ports[0].Port != 22 || svc.Spec.Ports[0].TargetPort.IntValue() != clusternames.LoginUserSSHPort ||
		svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Selector["sunk.dev/login-user"] != "ada" {
		t.Errorf("service %+v", svc.Spec)
	}
	sec := LoginUserSecret(n, "users", ada, []byte("KEY"))
	if string(sec.Data[LoginUserAuthorizedKeys]) != "ssh-ed25519 AAAA ada@laptop\n" || string(sec.Data[SSHHostKeyName]) != "KEY" {
		t.Errorf("secret %v", sec.Data)
	}
}

func TestCheckLoginUser(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(u *directory.User)
		want string
	}{
		{"ok", func(*directory.User) {}, ""},
		{"root", func(u *directory.User) { u.UID = 0 }, "uidNumber 0 is below 1000"},
		{"slurm's gid", func(u *directory.User) { u.GID = 64030 % 1000 }, "gidNumber 30 is below 1000"},
		{"colon in name", func(u *directory.User) { u.Name = "a:b" }, `user name "a:b"`},
		{"newline in shell", func(u *directory.User) { u.Shell = "/bin/sh\nroot::0:0::/:/bin/sh" }, "loginShell"},
		{"relative home", func(u *directory.User) { u.Home = "home/ada" }, "homeDirectory"},
		{"system group", func(u *directory.User) { u.Groups = append(u.Groups, directory.Group{Name: "sudo", GID: 27}) }, "group sudo: gidNumber 27"},
		{"space in group", func(u *directory.User) { u.Groups = append(u.Groups, directory.Group{Name: "a b", GID: 7000}) }, `group name "a b"`},
	} {
		u := ada
		u.Groups = append([]directory.Group(nil), ada.Groups...)
		tc.mod(&u)
		err := CheckLoginUser(u)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestLoginServicesSelectTheirOwnPods: the shared login Service takes no pool's pods (a user
// outside a pool's group would be refused there, and a per-user pod's sshd listens on another
// port), and each pool's Service takes its own pods alone.
func TestLoginServicesSelectTheirOwnPods(t *testing.T) {
	sc := full()
	sc.Spec.Login.Pools = []sunkv1.LoginPool{{Name: "users", Group: "researchers"},
		{Name: "team", Type: sunkv1.LoginPoolGroup, Group: "researchers"}}
	n := clusternames.For(sc, "")
	c, err := RenderConfig(sc, ConfigInputs{Names: n})
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]map[string]string{
		"shared": LoginStatefulSet(sc, n, c).Spec.Template.Labels,
		"ada":    LoginUserStatefulSet(sc, n, sc.Spec.Login.Pools[0], ada).Spec.Template.Labels,
		"team":   LoginGroupStatefulSet(sc, n, sc.Spec.Login.Pools[1]).Spec.Template.Labels,
	}
	services := map[string]*corev1.Service{
		"shared": LoginService(sc, n), "ada": LoginUserService(n, sc.Spec.Login.Pools[0], "ada"),
		"team": LoginGroupService(n, sc.Spec.Login.Pools[1]),
	}
	hosts := map[string]*corev1.Service{"shared": LoginHostsService(n), "ada": LoginUserHostsService(n), "team": LoginGroupHostsService(n)}
	selects := func(sel, labels map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	for svc := range services {
		for pod, labels := range pods {
			if got := selects(services[svc].Spec.Selector, labels); got != (svc == pod) {
				t.Errorf("Service %s selects %s's pod: %v", services[svc].Name, pod, got)
			}
			if got := selects(hosts[svc].Spec.Selector, labels); got != (svc == pod) {
				t.Errorf("headless Service %s selects %s's pod: %v", hosts[svc].Name, pod, got)
			}
		}
	}
	team := LoginGroupStatefulSet(sc, n, sc.Spec.Login.Pools[1])
	if !slices.Contains(team.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "SUNK_SSH_ALLOW_GROUPS", Value: "researchers"}) ||
		team.Spec.ServiceName != n.LoginGroupHosts {
		t.Errorf("team: env %v, serviceName %s", team.Spec.Template.Spec.Containers[0].Env, team.Spec.ServiceName)
	}
	if got := ControllerStatefulSet(sc, n, c).Spec.Template.Spec.DNSConfig.Searches; len(got) != 3 {
		t.Errorf("slurmctld's DNS search list %v: want the shared, per-user and group login hosts", got)
	}
}
