//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// daemonsOnlyTheClusterReaches checks the cluster's NetworkPolicies on the test bed's enforcing
// network (hack/env-kube.sh start_netpol): from a pod of an ordinary namespace, slurmctld,
// slurmdbd, MariaDB and the node watcher refuse the connection, while the cluster's own pods
// reach them: the login pod slurmctld, slurmdbd and the node watcher, slurmdbd MariaDB (which
// refuses the login pod). The cluster needs managed accounting and the node watcher.
func (e *operatorEnv) daemonsOnlyTheClusterReaches(t *testing.T, cluster, login string) {
	t.Helper()
	ip := func(component string) string { return e.podOf(t, cluster, component).Status.PodIP }
	ctld := ip(wellknown.ComponentController)
	slurmdbd := e.podOf(t, cluster, wellknown.ComponentAccounting)
	targets := map[string]string{
		"slurmctld":    fmt.Sprintf("%s:%d", ctld, clusternames.SlurmctldPort),
		"node watcher": fmt.Sprintf("%s:%d", ctld, clusternames.NodeWatchPort),
		"slurmdbd":     fmt.Sprintf("%s:%d", slurmdbd.Status.PodIP, clusternames.SlurmdbdPort),
		"MariaDB":      fmt.Sprintf("%s:%d", ip(wellknown.ComponentDatabase), clusternames.MariaDBPort),
	}
	var names []string
	for name := range targets {
		names = append(names, name)
	}
	sort.Strings(names)

	// The cluster's pods first: every daemon is up and listening, so that a refusal below is
	// the policy's. bash's /dev/tcp, as the Slurm image has no nc.
	connects := func(pod, container, target string) error {
		host, port, _ := strings.Cut(target, ":")
		out, err := e.sh(t, pod, container, fmt.Sprintf("timeout 5 bash -c 'exec 3<>/dev/tcp/%s/%s'", host, port))
		if err != nil {
			return fmt.Errorf("%v %s", err, strings.TrimSpace(out))
		}
		return nil
	}
	for _, name := range names {
		pod, container := login, "login"
		if name == "MariaDB" {
			pod, container = slurmdbd.Name, "slurmdbd"
		}
		if err := connects(pod, container, targets[name]); err != nil {
			t.Errorf("%s/%s cannot reach %s at %s: %v", pod, container, name, targets[name], err)
		}
	}
	if connects(login, "login", targets["MariaDB"]) == nil {
		t.Errorf("the login pod reaches MariaDB at %s: want it refused (slurmdbd's alone)", targets["MariaDB"])
	}

	// busybox nc -e true: exit 0 once connected, without waiting for the daemon to speak.
	var script strings.Builder
	for _, name := range names {
		host, port, _ := strings.Cut(targets[name], ":")
		fmt.Fprintf(&script, "if nc -w 2 %s %s -e true; then echo '%s open'; else echo '%s closed'; fi\n", host, port, name, name)
	}
	cs := e.Clientset
	ns := addonNamespace(t, cs, "e2e-stranger")
	start := time.Now()
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), busyboxPod("stranger", script.String()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "stranger", 90*time.Second, podSucceeded)
	out := podLogs(t, cs, ns, "stranger")
	t.Logf("a pod of namespace %s (%s):\n%s", ns, time.Since(start).Round(100*time.Millisecond), out)
	for _, name := range names {
		if !strings.Contains(out, name+" closed\n") {
			t.Errorf("a pod of another namespace reaches %s at %s (or did not try): want it refused by the cluster's NetworkPolicies", name, targets[name])
		}
	}
}
