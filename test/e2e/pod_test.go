//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"sunk.dev/sunk/test/testenv"
)

// A pod from an image built on this machine runs on the real kubelet (containerd + runc) and
// its logs are read back through the API server.
func TestPodFromLocalImageRunsOnRealKubelet(t *testing.T) {
	parallel(t)
	cluster := testenv.Cluster(t)
	ctx := context.Background()

	rootfs := t.TempDir()
	testenv.GoBinary(t, filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "hello"), filepath.Join(rootfs, "hello"))
	ref := fmt.Sprintf("sunk.dev/e2e-hello:%d", time.Now().UnixNano())
	cluster.BuildImage(t, rootfs, ref, `["/hello"]`)

	message := fmt.Sprintf("m-%d", time.Now().UnixNano())
	pods := cluster.Clientset.CoreV1().Pods("default")
	pod, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-hello-"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "hello", Image: ref, ImagePullPolicy: corev1.PullNever,
				Env: []corev1.EnvVar{{Name: "SUNK_MESSAGE", Value: message}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{}) })

	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err = pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
	})
	if err != nil {
		t.Fatalf("pod %s did not finish: %v (status %+v)", pod.Name, err, pod.Status)
	}
	if pod.Status.Phase != corev1.PodSucceeded || pod.Spec.NodeName != cluster.NodeName {
		t.Fatalf("pod %s: phase %s on node %q, want Succeeded on %s", pod.Name, pod.Status.Phase, pod.Spec.NodeName, cluster.NodeName)
	}
	logs, err := pods.GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	want := fmt.Sprintf("hello from sunk e2e, pod %s, message %s", pod.Name, message)
	if strings.TrimSpace(string(logs)) != want {
		t.Fatalf("logs %q, want %q", logs, want)
	}
}
