package render

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/clustertls"
)

// With spec.tls (the default) slurmrestd listens on its pod's loopback behind the terminator,
// which alone serves slurmrestd's port, and the node watcher serves TLS; both mount the serving
// pair and never the CA's key. Turned off, both are as before TLS.
func TestTLSFollowsTheSpec(t *testing.T) {
	for _, on := range []bool{true, false} {
		sc := minimal()
		sc.Spec.Controller.NodeWatcher = true
		if !on {
			sc.Spec.TLS.Enabled = ptr.To(false)
		}
		n := clusternames.For(sc, "")
		cfg, err := RenderConfig(sc, ConfigInputs{Names: n})
		if err != nil {
			t.Fatal(err)
		}
		rest := RestAPIDeployment(sc, n, cfg).Spec.Template.Spec
		ctld := ControllerStatefulSet(sc, n, cfg).Spec.Template.Spec
		var names []string
		for _, c := range rest.Containers {
			names = append(names, c.Name)
		}
		env := map[string]string{}
		for _, e := range rest.Containers[0].Env {
			env[e.Name] = e.Value
		}
		watcher := ctld.Containers[len(ctld.Containers)-1]
		watcherTLS := slices.ContainsFunc(watcher.Args, func(a string) bool { return strings.HasPrefix(a, "--tls-cert=") })
		if on {
			if !slices.Equal(names, []string{"slurmrestd", TLSProxyContainer}) || env[SlurmrestdListenEnv] != "127.0.0.1:6821" ||
				len(rest.Containers[0].Ports) != 0 || rest.Containers[1].Ports[0].ContainerPort != clusternames.SlurmrestdPort {
				t.Errorf("TLS on: containers %v, slurmrestd's env %v, ports %v", names, env, rest.Containers[0].Ports)
			}
			if !watcherTLS {
				t.Errorf("TLS on: the node watcher's args %v", watcher.Args)
			}
			for _, v := range append(rest.Volumes, ctld.Volumes...) {
				if v.Name != tlsVolumeName {
					continue
				}
				if v.Secret == nil || v.Secret.SecretName != n.TLSSecret || !slices.Equal(v.Secret.Items, []corev1.KeyToPath{
					{Key: clustertls.CertKey, Path: clustertls.CertKey}, {Key: clustertls.KeyKey, Path: clustertls.KeyKey}}) {
					t.Errorf("the TLS volume: %+v, want the serving pair of %s alone", v, n.TLSSecret)
				}
			}
			continue
		}
		if !slices.Equal(names, []string{"slurmrestd"}) || env[SlurmrestdListenEnv] != "" || rest.Containers[0].Ports[0].ContainerPort != clusternames.SlurmrestdPort || watcherTLS {
			t.Errorf("TLS off: containers %v, env %v, the watcher's args %v", names, env, watcher.Args)
		}
	}
}
