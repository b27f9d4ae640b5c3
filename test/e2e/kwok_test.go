//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"sunk.dev/sunk/test/testenv"
)

// kwok fake nodes join the real control plane: the default scheduler places pods that tolerate
// them, and kwok drives those pods to Running, so scale tests need no real machines.
func TestKwokNodesRunPods(t *testing.T) {
	cluster := testenv.Cluster(t)
	const nodes, pods = 5, 20
	cluster.KwokNodes(t, nodes)
	ctx := context.Background()
	ns := fmt.Sprintf("e2e-kwok-%d", time.Now().UnixNano())
	core := cluster.Clientset.CoreV1()
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = core.Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	for i := 0; i < pods; i++ {
		_, err := core.Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fake-%d", i)},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"type": "kwok"},
				Tolerations:  []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
				Containers:   []corev1.Container{{Name: "c", Image: "fake"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	var running int
	used := map[string]bool{}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := core.Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running = 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
				used[p.Spec.NodeName] = true
			}
		}
		return running == pods, nil
	})
	if err != nil {
		t.Fatalf("%d of %d pods Running on kwok nodes: %v", running, pods, err)
	}
	if len(used) < 2 {
		t.Fatalf("pods landed on %v, want them spread over several kwok nodes", used)
	}
}
