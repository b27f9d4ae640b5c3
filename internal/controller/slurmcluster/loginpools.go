package slurmcluster

import (
	"context"
	"slices"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/directory"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
)

// LoginPools keeps each SlurmCluster's login pools (spec.login.pools): a Group pool's
// StatefulSet and Service as the spec says, and a PerUser pool's pods in step with the
// directory its sssd.conf names: a pod for each member of the pool's group, made when they
// appear and deleted a grace period after they leave. It is a controller of its own, beside
// Reconciler (whose helpers it shares), because the directory has no watch: it reads every
// PerUser pool's group each Poll.
type LoginPools struct {
	*Reconciler
	// Poll is how often the directory is read (DefaultLoginPoolPoll when zero).
	Poll time.Duration
	// Directory opens the directory of a cluster (directory.Dial when nil).
	Directory func(ctx context.Context, cfg directory.Config) (MemberLister, error)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// MemberLister is what LoginPools needs of a directory.
type MemberLister interface {
	Members(ctx context.Context, group string) ([]directory.User, []string, error)
	Close() error
}

// DefaultLoginPoolPoll is how often the directory is read: a user added to a pool's group
// waits at most this long for their pod.
const DefaultLoginPoolPoll = 30 * time.Second

// SetupWithManager runs LoginPools for every SlurmCluster with pools, woken by changes of the
// cluster and of the pools' StatefulSets, and by its own Poll.
func (r *LoginPools) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("loginpools").
		// Spec changes only: a status write (the syncer's, the other controller's, this one's)
		// is no reason to read the directory again.
		For(&sunkv1.SlurmCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.StatefulSet{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			c := o.GetLabels()[wellknown.LabelComponent]
			return c == wellknown.ComponentLoginUser || c == wellknown.ComponentLoginGroup
		}))).
		Complete(r)
}

// Reconcile brings one cluster's login pools to its spec and, for PerUser pools, to their
// groups' members.
func (r *LoginPools) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sc := &sunkv1.SlurmCluster{}
	if err := r.Get(ctx, req.NamespacedName, sc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // owner references take the pools with the cluster
	}
	n := clusternames.For(sc, r.ClusterDomain)
	// 1. The release's image unless the spec names one; without one the SlurmCluster
	// controller reports NoImage, and the pods wait.
	withImage, err := r.Images.Resolve(sc)
	if err != nil {
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	hold, err := r.clientsTierHeld(ctx, sc, n)
	if err != nil {
		return ctrl.Result{}, err
	}
	// 2. Group pools: their pods' SSSD checks who may log in, so the spec is all they need.
	if err := r.applyGroupPools(ctx, sc, withImage, n, hold); err != nil {
		return ctrl.Result{}, err
	}
	// 3. PerUser pools: a pod per member of each group, as the directory has it now.
	sets, err := r.loginUserSets(ctx, sc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !render.HasLoginPools(sc, sunkv1.LoginPoolPerUser) {
		if err := r.removeUserPools(ctx, sc, n, sets); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.patchLoginPoolStatus(ctx, sc, nil)
	}
	if err := r.apply(ctx, sc, render.LoginUserHostsService(n)); err != nil {
		return ctrl.Result{}, err
	}
	members, err := r.readPoolMembers(ctx, sc)
	if err != nil {
		// Fail closed: a directory that cannot be read says nothing about who left.
		r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonDirectoryUnreadable, err.Error())
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	for _, p := range sc.Spec.Login.Pools {
		for _, u := range members[p.Name] {
			if err := r.ensureLoginUser(ctx, sc, withImage, n, p, u, sets, hold); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	next, err := r.retireLeavers(ctx, sc, members, sets)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.patchLoginPoolStatus(ctx, sc, members); err != nil {
		return ctrl.Result{}, err
	}
	if next <= 0 || next > r.poll() {
		next = r.poll()
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

func (r *LoginPools) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return DefaultLoginPoolPoll
}

func (r *LoginPools) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// clientsTierHeld says whether an upgrade still holds the clients tier (version.go): the
// shared login StatefulSet's template runs another release than spec.slurmVersion. Per-user
// pods are clients too; meanwhile they keep their templates, since a client newer than
// slurmctld cannot talk to it.
func (r *LoginPools) clientsTierHeld(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names) (bool, error) {
	s := &appsv1.StatefulSet{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: n.Login}, s); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return s.Spec.Template.Labels[wellknown.LabelSlurmVersion] != n.SlurmVersion, nil
}

// patchLoginPoolStatus writes each pool's users, leavers and ready pods into the status
// (members: each PerUser pool's, as just read).
func (r *LoginPools) patchLoginPoolStatus(ctx context.Context, sc *sunkv1.SlurmCluster, members map[string][]directory.User) error {
	sets, err := r.loginUserSets(ctx, sc)
	if err != nil {
		return err
	}
	n := clusternames.For(sc, r.ClusterDomain)
	var out []sunkv1.LoginPoolStatus
	for _, p := range sc.Spec.Login.Pools {
		st := sunkv1.LoginPoolStatus{Name: p.Name, Type: render.PoolType(p)}
		if render.PoolType(p) == sunkv1.LoginPoolGroup {
			g := &appsv1.StatefulSet{}
			if err := r.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: n.LoginGroup(p.Name)}, g); client.IgnoreNotFound(err) != nil {
				return err
			}
			st.Ready = g.Status.ReadyReplicas
			out = append(out, st)
			continue
		}
		for _, u := range members[p.Name] {
			st.Users = append(st.Users, u.Name)
		}
		for _, s := range sets {
			if s.Labels[wellknown.LabelLoginPool] != p.Name {
				continue
			}
			st.Ready += s.Status.ReadyReplicas
			if _, left := s.Annotations[wellknown.AnnotationLoginUserLeft]; left {
				st.Leaving = append(st.Leaving, s.Annotations[wellknown.AnnotationLoginUser])
			}
		}
		sort.Strings(st.Users)
		sort.Strings(st.Leaving)
		out = append(out, st)
	}
	r.Metrics.observePools(client.ObjectKeyFromObject(sc), out)
	if equalPoolStatus(sc.Status.LoginPools, out) {
		return nil
	}
	patch := client.MergeFrom(sc.DeepCopy())
	sc.Status.LoginPools = out
	return r.Status().Patch(ctx, sc, patch)
}

func equalPoolStatus(a, b []sunkv1.LoginPoolStatus) bool {
	return slices.EqualFunc(a, b, func(x, y sunkv1.LoginPoolStatus) bool {
		return x.Name == y.Name && x.Type == y.Type && x.Ready == y.Ready && slices.Equal(x.Users, y.Users) && slices.Equal(x.Leaving, y.Leaving)
	})
}
