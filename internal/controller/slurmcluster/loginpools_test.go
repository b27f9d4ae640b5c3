package slurmcluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/directory"
	"sunk.dev/sunk/internal/slurmversion"
	"sunk.dev/sunk/pkg/wellknown"
)

// fakeDirectory answers Members from a map, or fails.
type fakeDirectory struct {
	groups map[string][]directory.User
	err    error
}

func (d *fakeDirectory) Members(_ context.Context, group string) ([]directory.User, []string, error) {
	if d.err != nil {
		return nil, nil, d.err
	}
	return d.groups[group], nil, nil
}
func (d *fakeDirectory) Close() error { return nil }

func dirUser(name string, uid int64) directory.User {
	return directory.User{Name: name, UID: uid, GID: uid, Home: "/home/" + name, Shell: "/bin/bash"}
}

// TestLoginPoolsFollowTheDirectory: members get a StatefulSet with its Secret and Service; a
// user who leaves is marked, kept through the grace period and then deleted; one who comes back
// within it is unmarked; a directory that fails deletes nothing; a uid below 1000 gets no pod;
// the status and the metrics follow.
func TestLoginPoolsFollowTheDirectory(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, sunkv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	sc := &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "slurm", UID: "uid-c1"},
		Spec: sunkv1.SlurmClusterSpec{Login: sunkv1.LoginSpec{
			SSSDConfigSecretRef: &corev1.LocalObjectReference{Name: "sssd"},
			Pools: []sunkv1.LoginPool{{Name: "users", Group: "analysts", GracePeriod: &metav1.Duration{Duration: time.Minute}},
				{Name: "team", Type: sunkv1.LoginPoolGroup, Group: "analysts", Replicas: ptr.To(int32(2))}},
		}},
	}
	sssd := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sssd", Namespace: "slurm"}, Data: map[string][]byte{"sssd.conf": []byte(
		"[sssd]\ndomains = d\n[domain/d]\nid_provider = ldap\nldap_uri = ldap://dir.slurm.svc\nldap_search_base = dc=x\n")}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sc, sssd).WithStatusSubresource(sc).Build()
	m, reg := newTestMetrics(t)
	rec := events.NewFakeRecorder(100)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	dir := &fakeDirectory{groups: map[string][]directory.User{"analysts": {dirUser("ada", 20001), dirUser("grace", 20002), dirUser("mallory", 0)}}}
	// No spec.image: the pods run the operator's image of the cluster's release.
	images := slurmversion.Images{sc.Spec.Version(): "sunk.dev/slurm:release"}
	r := &LoginPools{Reconciler: &Reconciler{Client: c, Scheme: scheme, Recorder: rec, Metrics: m, Images: images}, Poll: 30 * time.Second,
		Directory: func(context.Context, directory.Config) (MemberLister, error) { return dir, nil },
		Now:       func() time.Time { return now }}
	ctx := context.Background()
	n := clusternames.For(sc, "")
	reconcile := func() ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "slurm", Name: "c1"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	sets := func() map[string]string { // name -> the left annotation
		t.Helper()
		var list appsv1.StatefulSetList
		if err := c.List(ctx, &list, client.InNamespace("slurm"), client.MatchingLabels{wellknown.LabelComponent: wellknown.ComponentLoginUser}); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range list.Items {
			out[s.Name] = s.Annotations[wellknown.AnnotationLoginUserLeft]
		}
		return out
	}
	status := func() sunkv1.LoginPoolStatus {
		t.Helper()
		got := &sunkv1.SlurmCluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sc), got); err != nil {
			t.Fatal(err)
		}
		if len(got.Status.LoginPools) != 2 || got.Status.LoginPools[1].Name != "team" {
			t.Fatalf("status.loginPools %+v", got.Status.LoginPools)
		}
		return got.Status.LoginPools[0]
	}
	drainEvents := func() string {
		var out []string
		for {
			select {
			case e := <-rec.Events:
				out = append(out, e)
			default:
				return strings.Join(out, "\n")
			}
		}
	}
	ada, grace := n.LoginUser("users", "ada"), n.LoginUser("users", "grace")

	if res := reconcile(); res.RequeueAfter != 30*time.Second {
		t.Errorf("requeue after %s, want the poll", res.RequeueAfter)
	}
	if got := sets(); len(got) != 2 || got[ada] != "" || got[grace] != "" {
		t.Fatalf("statefulsets %v, want ada's and grace's, unmarked", got)
	}
	sec, svc := &corev1.Secret{}, &corev1.Service{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "slurm", Name: ada}, sec); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "slurm", Name: ada}, svc); err != nil {
		t.Fatal(err)
	}
	if o := metav1.GetControllerOf(sec); o == nil || o.Kind != "StatefulSet" || o.Name != ada {
		t.Errorf("ada's Secret is controlled by %+v, want her StatefulSet", o)
	}
	hostKey := string(sec.Data["ssh_host_ed25519_key"])
	// The Group pool: its StatefulSet of 2 lets in analysts alone, behind its Service.
	team := &appsv1.StatefulSet{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "slurm", Name: n.LoginGroup("team")}, team); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(team.Spec.Replicas, 0) != 2 || team.Spec.Template.Spec.Containers[0].Image != "sunk.dev/slurm:release" ||
		!slices.Contains(team.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "SUNK_SSH_ALLOW_GROUPS", Value: "analysts"}) {
		t.Errorf("team's StatefulSet: %d replicas, container %+v", ptr.Deref(team.Spec.Replicas, 0), team.Spec.Template.Spec.Containers[0])
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "slurm", Name: n.LoginGroup("team")}, &corev1.Service{}); err != nil {
		t.Errorf("team's Service: %v", err)
	}
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "slurm", Name: ada}, sts); err != nil {
		t.Fatal(err)
	}
	for _, ctr := range append(sts.Spec.Template.Spec.InitContainers, sts.Spec.Template.Spec.Containers...) {
		if ctr.Image != "sunk.dev/slurm:release" {
			t.Errorf("container %s runs image %q, want the release's", ctr.Name, ctr.Image)
		}
	}
	if ev := drainEvents(); !strings.Contains(ev, "LoginUserRefused") || !strings.Contains(ev, "mallory: uidNumber 0") ||
		strings.Count(ev, "LoginUserAdded") != 2 {
		t.Errorf("events:\n%s", ev)
	}
	if st := status(); !slices.Equal(st.Users, []string{"ada", "grace"}) || len(st.Leaving) != 0 {
		t.Errorf("status %+v", st)
	}

	// The directory fails: nothing changes.
	dir.err = errors.New("ldap: connection refused")
	dir.groups["analysts"] = nil
	reconcile()
	if got := sets(); len(got) != 2 || got[grace] != "" {
		t.Fatalf("after a failed read: %v, want both kept, unmarked", got)
	}
	if ev := drainEvents(); !strings.Contains(ev, "DirectoryUnreadable") {
		t.Errorf("events:\n%s", ev)
	}

	// grace leaves: marked, kept for the grace period; her requeue comes when it ends.
	dir.err = nil
	dir.groups["analysts"] = []directory.User{dirUser("ada", 20001)}
	if res := reconcile(); res.RequeueAfter != 30*time.Second {
		t.Errorf("requeue after %s, want the poll (the grace period is longer)", res.RequeueAfter)
	}
	if got := sets(); got[grace] != now.Format(time.RFC3339) || got[ada] != "" {
		t.Fatalf("grace left: %v, want her marked at %s", got, now.Format(time.RFC3339))
	}
	if st := status(); !slices.Equal(st.Users, []string{"ada"}) || !slices.Equal(st.Leaving, []string{"grace"}) {
		t.Errorf("status %+v", st)
	}
	now = now.Add(50 * time.Second)
	if res := reconcile(); res.RequeueAfter != 10*time.Second {
		t.Errorf("requeue after %s, want the 10 s left of grace's grace period", res.RequeueAfter)
	}
	// She is back within the grace period: unmarked, her host key kept.
	dir.groups["analysts"] = []directory.User{dirUser("ada", 20001), dirUser("grace", 20002)}
	reconcile()
	if got := sets(); got[grace] != "" {
		t.Fatalf("grace back: %v, want her unmarked", got)
	}
	// She leaves again, for good this time.
	dir.groups["analysts"] = []directory.User{dirUser("ada", 20001)}
	reconcile()
	now = now.Add(61 * time.Second)
	reconcile()
	if got := sets(); len(got) != 1 || got[ada] != "" {
		t.Fatalf("after the grace period: %v, want ada's alone", got)
	}
	if ev := drainEvents(); strings.Count(ev, "LoginUserLeaving") != 2 || !strings.Contains(ev, "LoginUserRemoved") {
		t.Errorf("events:\n%s", ev)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "slurm", Name: ada}, sec); err != nil || string(sec.Data["ssh_host_ed25519_key"]) != hostKey {
		t.Errorf("ada's host key changed (%v)", err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP sunk_login_pool_users Members of a PerUser login pool's directory group who have a login pod.
# TYPE sunk_login_pool_users gauge
sunk_login_pool_users{cluster="slurm/c1",pool="users"} 1
`), "sunk_login_pool_users"); err != nil {
		t.Error(err)
	}

	// The pool goes from the spec: its pods go at once, with the status and the series.
	if err := c.Get(ctx, client.ObjectKeyFromObject(sc), sc); err != nil {
		t.Fatal(err)
	}
	sc.Spec.Login.Pools = nil
	if err := c.Update(ctx, sc); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if got := sets(); len(got) != 0 {
		t.Fatalf("no pools: %v", got)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "slurm", Name: n.LoginGroup("team")}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("team's StatefulSet without pools: %v", err)
	}
	if n, err := testutil.GatherAndCount(reg, "sunk_login_pool_users"); err != nil || n != 0 {
		t.Errorf("series left: %d (%v)", n, err)
	}
}
