//go:build integration

package charts

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// TestOperatorExecPolicy installs the sunk chart's RBAC and its exec ValidatingAdmissionPolicy
// in a real kube-apiserver and execs as the operator's ServiceAccount: the command the
// operator runs (render.ConfigHashCommand in the slurmctld container) passes admission, any
// other command or container is denied, and other users are not concerned. The apiserver has
// no kubelet, so an admitted exec ends in "does not have a host assigned" instead.
func TestOperatorExecPolicy(t *testing.T) {
	cfg := testenv.API(t, testenv.APIOptions{})
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out, err := helm(t, "template", "sunk", "sunk", "-n", "sunk-system")
	if err != nil {
		t.Fatal(err)
	}
	installRBACAndPolicies(t, cfg, out)

	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "slurm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "slurm", Name: "c1-controller-0"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: render.ControllerContainer, Image: "slurm"}, {Name: "sidecar", Image: "busybox"}}},
	}
	if _, err := admin.CoreV1().Pods("slurm").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	asOperator := rest.CopyConfig(cfg)
	asOperator.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:sunk-system:sunk-operator",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:sunk-system", "system:authenticated"}}
	operator, err := kubernetes.NewForConfig(asOperator)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(cs kubernetes.Interface, opts *corev1.PodExecOptions) error {
		return cs.CoreV1().RESTClient().Post().Namespace("slurm").Resource("pods").Name(pod.Name).SubResource("exec").
			VersionedParams(opts, scheme.ParameterCodec).Do(ctx).Error()
	}
	admitted := func(err error) error {
		if err == nil || !strings.Contains(err.Error(), "does not have a host assigned") {
			return fmt.Errorf("want admission to pass and the exec to fail for want of a node, got %v", err)
		}
		return nil
	}
	denied := func(err error) error {
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "sunk-operator-exec") {
			return fmt.Errorf("want the policy sunk-operator-exec to deny it, got %v", err)
		}
		return nil
	}

	// The apiserver loads policies asynchronously: wait until the policy denies.
	readKey := &corev1.PodExecOptions{Container: render.ControllerContainer, Command: []string{"cat", "/run/slurm-keys/slurm.key"}, Stdout: true}
	wait.For(t, "the exec policy in force", 30*time.Second, 100*time.Millisecond, func() error { return denied(exec(operator, readKey)) })

	for _, c := range []struct {
		what  string
		opts  *corev1.PodExecOptions
		check func(error) error
	}{
		{"the operator's own command", &corev1.PodExecOptions{Container: render.ControllerContainer, Command: render.ConfigHashCommand(), Stdout: true, Stderr: true}, admitted},
		{"its command in another container", &corev1.PodExecOptions{Container: "sidecar", Command: render.ConfigHashCommand(), Stdout: true}, denied},
		{"its command with stdin", &corev1.PodExecOptions{Container: render.ControllerContainer, Command: render.ConfigHashCommand(), Stdin: true, Stdout: true}, denied},
		{"a shell", &corev1.PodExecOptions{Container: render.ControllerContainer, Command: []string{"sh", "-c", "head -n1 /etc/slurm/slurm.conf"}, Stdout: true}, denied},
		{"reading the auth key", readKey, denied},
	} {
		if err := c.check(exec(operator, c.opts)); err != nil {
			t.Errorf("operator execs %s: %v", c.what, err)
		}
	}
	// Other users are not the policy's business.
	if err := admitted(exec(admin, readKey)); err != nil {
		t.Errorf("an admin execs a command of their own: %v", err)
	}
}

// installRBACAndPolicies creates the ServiceAccounts, RBAC objects and admission policies of
// a render (the rest needs controllers and nodes this apiserver does not have).
func installRBACAndPolicies(t *testing.T, cfg *rest.Config, manifests string) {
	t.Helper()
	dyn, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	namespaces := map[string]bool{}
	for _, doc := range strings.Split(manifests, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		switch u.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		default:
			continue
		}
		if ns := u.GetNamespace(); ns != "" && !namespaces[ns] {
			nsObj := &unstructured.Unstructured{}
			nsObj.SetAPIVersion("v1")
			nsObj.SetKind("Namespace")
			nsObj.SetName(ns)
			if err := dyn.Create(ctx, nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			namespaces[ns] = true
		}
		if err := dyn.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}
