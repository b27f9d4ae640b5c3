package render

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// The check pod runs the controller's image with nothing of the cluster's secrets: no key, no
// service account token, not as root, read-only, bounded in time.
func TestConfigCheckPod(t *testing.T) {
	sc := full()
	sc.Spec.Controller.Image = "example.com/slurm:custom"
	n := clusternames.For(sc, "")
	cfg, err := RenderConfig(sc, ConfigInputs{Names: n})
	if err != nil {
		t.Fatal(err)
	}
	p := ConfigCheckPod(sc, n, cfg)
	c := p.Spec.Containers[0]
	switch {
	case p.Name != "demo-cluster-config-check-"+cfg.Hash || p.Annotations[wellknown.AnnotationConfigHash] != cfg.Hash:
		t.Errorf("name %s, annotations %v", p.Name, p.Annotations)
	case c.Image != "example.com/slurm:custom":
		t.Errorf("image %s, want the controller's", c.Image)
	case p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken:
		t.Error("the service account token is mounted")
	case p.Spec.SecurityContext.RunAsNonRoot == nil || !*p.Spec.SecurityContext.RunAsNonRoot || *c.SecurityContext.ReadOnlyRootFilesystem != true:
		t.Error("runs as root or writable")
	case p.Spec.RestartPolicy != corev1.RestartPolicyNever || p.Spec.ActiveDeadlineSeconds == nil:
		t.Error("restarts or runs without a deadline")
	case len(c.Env) != 1 || c.Env[0].Value != cfg.Hash || !strings.Contains(c.Command[2], "scontrol"):
		t.Errorf("env %v, command %v", c.Env, c.Command)
	}
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil || v.Projected != nil {
			t.Errorf("volume %s mounts a secret", v.Name)
		}
	}
	if cm := ConfigCheckConfigMap(n, cfg); cm.Name != n.ConfigCheck || cm.Data["slurm.conf"] != cfg.Files["slurm.conf"] {
		t.Errorf("candidate ConfigMap %s", cm.Name)
	}
}

func TestConfigCheckVerdict(t *testing.T) {
	ended := func(code int32, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}}}
	}
	for name, c := range map[string]struct {
		pod             *corev1.Pod
		done, ok, stale bool
		msg             string
	}{
		"pending":        {&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, false, false, false, ""},
		"accepted":       {ended(0, ""), true, true, false, ""},
		"refused":        {ended(1, "scontrol: fatal"), true, false, false, "scontrol: fatal"},
		"stale":          {ended(ExitStaleCandidate, "stale candidate"), true, false, true, "stale candidate"},
		"deadline":       {&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Message: "deadline"}}, true, false, false, "deadline"},
		"succeeded only": {&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, true, true, false, ""},
	} {
		done, ok, stale, msg := ConfigCheckVerdict(c.pod)
		if done != c.done || ok != c.ok || stale != c.stale || msg != c.msg {
			t.Errorf("%s: %v %v %v %q", name, done, ok, stale, msg)
		}
	}
}
