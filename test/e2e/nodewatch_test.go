//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// TestNodeWatcherOnTheLocalCluster runs a cluster with spec.controller.nodeWatcher: the
// operator puts sunk-nodewatch beside slurmctld with its Service, the syncer reads Slurm's node
// state through it (its NodesSynced message says so), it answers only a token of the cluster's
// JWT key naming SlurmUser (not a request without one, nor a Slurm user's own), a drain made in
// Slurm reaches the compute
// pod, and when the watcher is killed, a resume made while it restarts reaches the pod once it
// is back.
func TestNodeWatcherOnTheLocalCluster(t *testing.T) {
	parallel(t)
	e := startOperator(t)
	ctx := context.Background()
	const name = "nw"
	sc := &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: sunkv1.SlurmClusterSpec{SlurmVersion: testSlurmVersion, Image: slurmImage, ImagePullPolicy: corev1.PullNever,
			Controller: sunkv1.ControllerSpec{NodeWatcher: true},
			Partitions: []sunkv1.PartitionSpec{{Name: "main", Default: true}}},
	}
	e.createReady(t, sc)
	e.createReplicas(t, name, "compute", 1)
	login := e.podOf(t, name, wellknown.ComponentLogin).Name
	e.waitIdle(t, login, 3*time.Minute, "compute-0 idle", "compute-0")

	poll(t, time.Minute, "NodesSynced through the node watchers", func() error {
		c := meta.FindStatusCondition(e.cluster(t, name).Status.Conditions, sunkv1.ConditionNodesSynced)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "node watchers") {
			return fmt.Errorf("NodesSynced = %+v", c)
		}
		return nil
	})
	// The watcher answers with the table itself, as the syncer reads it.
	n := clusternames.For(sc, "")
	svc := &corev1.Service{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: n.NodeWatch}, svc); err != nil {
		t.Fatal(err)
	}
	// Over TLS (spec.tls, the default), verified as sunk's clients do: the cluster's CA and the
	// Service's name, whatever address is dialled.
	tlsSecret := &corev1.Secret{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: n.TLSSecret}, tlsSecret); err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := clustertls.ClientConfig(e.ns+"/"+name, n.ServerName(n.NodeWatch), clustertls.StaticRoots(tlsSecret.Data[clustertls.CACertKey]))
	if err != nil {
		t.Fatal(err)
	}
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	url := fmt.Sprintf("https://%s:%d%s?wait=1s", svc.Spec.ClusterIP, clusternames.NodeWatchPort, nodewatch.Path)
	// Only a token of the cluster's JWT key naming SlurmUser reads the table: not a request
	// without one, nor a Slurm user's own (`scontrol token`, signed with the same key).
	userToken := strings.TrimPrefix(strings.TrimSpace(e.mustSh(t, login, "login", "runuser -u nobody -- scontrol token")), "SLURM_JWT=")
	for what, tok := range map[string]string{"no token": "", "nobody's own token": userToken} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if tok != "" {
			req.Header.Set(nodewatch.TokenHeader, tok)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			t.Fatalf("GET %s with %s: %v", url, what, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "compute-0") {
			t.Errorf("GET %s with %s: %s %s, want 401 and no table", url, what, resp.Status, body)
		}
	}
	jwt := &corev1.Secret{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: n.JWTSecret}, jwt); err != nil {
		t.Fatal(err)
	}
	tokens, err := slurm.NewJWTSource(wellknown.SlurmUser, jwt.Data[wellknown.SecretJWTKey])
	if err != nil {
		t.Fatal(err)
	}
	// compute-0 registered after the watcher started: its partition must still be there (the
	// exporter's partition series and the dashboards are built from it).
	poll(t, 30*time.Second, "the watcher lists compute-0 in partition main", func() error {
		user, tok, err := tokens.Token(ctx)
		if err != nil {
			return err
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set(nodewatch.UserHeader, user)
		req.Header.Set(nodewatch.TokenHeader, tok)
		resp, err := httpc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var ch nodewatch.Changes
		if err := json.NewDecoder(resp.Body).Decode(&ch); err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s %v", url, resp.Status, err)
		}
		for _, n := range ch.Nodes {
			if n.Name == "compute-0" && slices.Contains(n.Partitions, "main") {
				return nil
			}
		}
		return fmt.Errorf("GET %s: no compute-0 in partition main: %+v", url, ch.Nodes)
	})

	var pod string
	for p := range e.memberPods(t, "compute") {
		pod = p
	}
	start := time.Now()
	e.mustSh(t, login, "login", "scontrol update nodename=compute-0 state=drain reason=e2e-watch")
	e.waitSlurmState(t, pod, "the drain on the pod", func(s string) bool { return strings.Contains(s, "drain") })
	t.Logf("a drain in Slurm reached the pod in %s", time.Since(start).Round(10*time.Millisecond))

	// Kill the watcher beside the primary; resume the node while it is away.
	ctld := n.ControllerPod(0)
	restarts := e.restarts(t, ctld, render.NodeWatchContainer)
	// As slurm, sunk-nodewatch's user: the container's root has no CAP_KILL.
	if out, err := e.sh(t, ctld, render.NodeWatchContainer, "setpriv --reuid=slurm --regid=slurm --clear-groups kill 1"); err != nil {
		t.Fatalf("killing sunk-nodewatch: %v %s", err, out)
	}
	// The change is made once the killed watcher is gone: a watcher still shutting down (it
	// answers its long polls first) could carry it, and then nothing here would have waited.
	poll(t, time.Minute, "the killed nodewatch container gone", func() error {
		if s := e.containerStatus(t, ctld, render.NodeWatchContainer); s.RestartCount <= restarts && s.State.Running != nil {
			return fmt.Errorf("still running (%d restarts)", s.RestartCount)
		}
		return nil
	})
	e.mustSh(t, login, "login", "scontrol update nodename=compute-0 state=resume")
	start = time.Now()
	e.waitSlurmState(t, pod, "the resume on the pod after the watcher came back", func(s string) bool { return s != "" && !strings.Contains(s, "drain") })
	t.Logf("the resume reached the pod %s after the watcher was gone", time.Since(start).Round(10*time.Millisecond))
	poll(t, time.Minute, "the nodewatch container restarted", func() error {
		if got := e.restarts(t, ctld, render.NodeWatchContainer); got <= restarts {
			return fmt.Errorf("%d restarts before, %d now", restarts, got)
		}
		return nil
	})
}

// restarts is the restart count of a pod's container.
func (e *operatorEnv) restarts(t *testing.T, pod, container string) int32 {
	t.Helper()
	return e.containerStatus(t, pod, container).RestartCount
}

// containerStatus is the status of a pod's container.
func (e *operatorEnv) containerStatus(t *testing.T, pod, container string) corev1.ContainerStatus {
	t.Helper()
	p := &corev1.Pod{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: pod}, p); err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return s
		}
	}
	t.Fatalf("pod %s has no container %s", pod, container)
	return corev1.ContainerStatus{}
}
