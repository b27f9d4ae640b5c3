package slurmcluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/directory"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
)

// The PerUser login pools' steps: who the members are, their pods, and who left.

// loginUserSets are the cluster's per-user login StatefulSets.
func (r *LoginPools) loginUserSets(ctx context.Context, sc *sunkv1.SlurmCluster) ([]appsv1.StatefulSet, error) {
	var list appsv1.StatefulSetList
	if err := r.List(ctx, &list, client.InNamespace(sc.Namespace), client.MatchingLabels{
		wellknown.LabelCluster: sc.Name, wellknown.LabelComponent: wellknown.ComponentLoginUser}); err != nil {
		return nil, err
	}
	var out []appsv1.StatefulSet
	for _, s := range list.Items {
		if metav1.IsControlledBy(&s, sc) {
			out = append(out, s)
		}
	}
	return out, nil
}

// removeUserPools deletes every per-user pod of a cluster that has no PerUser pools (any
// more): an admin's explicit choice, so without a grace period.
func (r *LoginPools) removeUserPools(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, sets []appsv1.StatefulSet) error {
	for i := range sets {
		if err := r.deleteLoginUser(ctx, sc, &sets[i], "its pool is gone from spec.login.pools"); err != nil {
			return err
		}
	}
	return r.deleteIfOwned(ctx, sc, &corev1.Service{}, n.LoginUserHosts)
}

// readPoolMembers reads each pool's members from the directory, keeping those who may have a
// pod (render.CheckLoginUser) and reporting the others. Any read error is the whole result's:
// a partial list must not look like users who left.
func (r *LoginPools) readPoolMembers(ctx context.Context, sc *sunkv1.SlurmCluster) (map[string][]directory.User, error) {
	cfg, err := r.directoryConfig(ctx, sc)
	if err != nil {
		return nil, err
	}
	open := r.Directory
	if open == nil {
		open = func(ctx context.Context, cfg directory.Config) (MemberLister, error) { return directory.Dial(ctx, cfg) }
	}
	dir, err := open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("directory of spec.login.sssdConfigSecretRef: %w", err)
	}
	defer dir.Close()
	out := map[string][]directory.User{}
	for _, p := range sc.Spec.Login.Pools {
		if render.PoolType(p) != sunkv1.LoginPoolPerUser {
			continue
		}
		users, warnings, err := dir.Members(ctx, p.Group)
		if err != nil {
			return nil, fmt.Errorf("login pool %s: group %s: %w", p.Name, p.Group, err)
		}
		for _, w := range warnings {
			r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonLoginUserRefused, fmt.Sprintf("login pool %s: %s", p.Name, w))
		}
		for _, u := range users {
			if err := render.CheckLoginUser(u); err != nil {
				r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonLoginUserRefused, fmt.Sprintf("login pool %s: %v", p.Name, err))
				continue
			}
			out[p.Name] = append(out[p.Name], u)
		}
	}
	return out, nil
}

// directoryConfig reads the directory's settings from the cluster's sssd.conf Secret.
func (r *LoginPools) directoryConfig(ctx context.Context, sc *sunkv1.SlurmCluster) (directory.Config, error) {
	ref := sc.Spec.Login.SSSDConfigSecretRef
	if ref == nil {
		return directory.Config{}, fmt.Errorf("spec.login.pools need spec.login.sssdConfigSecretRef")
	}
	s := &corev1.Secret{}
	if err := r.notOnlyOwned().Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: ref.Name}, s); err != nil {
		return directory.Config{}, fmt.Errorf("spec.login.sssdConfigSecretRef: %w", err)
	}
	cfg, err := directory.ParseSSSDConf(s.Data["sssd.conf"])
	if err != nil {
		return directory.Config{}, fmt.Errorf("Secret %s: %w", ref.Name, err)
	}
	return cfg, nil
}

// ensureLoginUser makes or updates a member's StatefulSet (rendered from withImage, the cluster
// with its release's image), and the Secret and Service it owns; a user who had left and is
// back is no longer leaving.
func (r *LoginPools) ensureLoginUser(ctx context.Context, sc, withImage *sunkv1.SlurmCluster, n clusternames.Names, p sunkv1.LoginPool, u directory.User, sets []appsv1.StatefulSet, hold bool) error {
	desired := render.LoginUserStatefulSet(withImage, n, p, u)
	i := slices.IndexFunc(sets, func(s appsv1.StatefulSet) bool { return s.Name == desired.Name })
	if i < 0 {
		if err := r.apply(ctx, sc, desired); err != nil {
			return err
		}
		r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonLoginUserAdded, fmt.Sprintf("login pool %s: %s (uid %d) gets pod %s-0", p.Name, u.Name, u.UID, desired.Name))
	} else {
		existing := &sets[i]
		if _, left := existing.Annotations[wellknown.AnnotationLoginUserLeft]; left {
			patch := client.MergeFrom(existing.DeepCopy())
			delete(existing.Annotations, wellknown.AnnotationLoginUserLeft)
			if err := r.Patch(ctx, existing, patch); err != nil {
				return err
			}
		}
		if hold {
			desired.Spec.Template = existing.Spec.Template
		}
		if err := r.apply(ctx, sc, desired); err != nil {
			return err
		}
	}
	// Past the cache, which may not hold the StatefulSet just made.
	owner := &appsv1.StatefulSet{}
	if err := r.notOnlyOwned().Get(ctx, client.ObjectKeyFromObject(desired), owner); err != nil {
		return err
	}
	hostKey, err := r.loginUserHostKey(ctx, sc, desired.Name)
	if err != nil {
		return err
	}
	if err := r.applyOwned(ctx, owner, render.LoginUserSecret(n, p.Name, u, hostKey)); err != nil {
		return err
	}
	return r.applyOwned(ctx, owner, render.LoginUserService(n, p, u.Name))
}

// loginUserHostKey is the host key of a user's pod: the one in its Secret, or a new one. A
// user's known_hosts stays valid as long as they stay in the pool.
func (r *LoginPools) loginUserHostKey(ctx context.Context, sc *sunkv1.SlurmCluster, name string) ([]byte, error) {
	s := &corev1.Secret{}
	err := r.notOnlyOwned().Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: name}, s)
	if err == nil && len(s.Data[render.SSHHostKeyName]) > 0 {
		return s.Data[render.SSHHostKeyName], nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	return sshHostKey()
}

// retireLeavers marks the pods of users no longer in their pool's group, and deletes those
// whose grace period has passed (and at once those of pools gone from the spec). It returns
// how soon the next grace period ends.
func (r *LoginPools) retireLeavers(ctx context.Context, sc *sunkv1.SlurmCluster, members map[string][]directory.User, sets []appsv1.StatefulSet) (time.Duration, error) {
	n := clusternames.For(sc, r.ClusterDomain)
	wanted := map[string]bool{}
	for pool, users := range members {
		for _, u := range users {
			wanted[n.LoginUser(pool, u.Name)] = true
		}
	}
	var next time.Duration
	for i := range sets {
		s := &sets[i]
		if wanted[s.Name] {
			continue
		}
		pool := s.Labels[wellknown.LabelLoginPool]
		p := slices.IndexFunc(sc.Spec.Login.Pools, func(p sunkv1.LoginPool) bool {
			return p.Name == pool && render.PoolType(p) == sunkv1.LoginPoolPerUser
		})
		if p < 0 {
			if err := r.deleteLoginUser(ctx, sc, s, "its pool is gone from spec.login.pools"); err != nil {
				return 0, err
			}
			continue
		}
		grace := 10 * time.Minute
		if g := sc.Spec.Login.Pools[p].GracePeriod; g != nil {
			grace = g.Duration
		}
		left, err := time.Parse(time.RFC3339, s.Annotations[wellknown.AnnotationLoginUserLeft])
		if err != nil { // not marked yet (or marked unreadably): the grace period starts now
			left = r.now()
			patch := client.MergeFrom(s.DeepCopy())
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[wellknown.AnnotationLoginUserLeft] = left.UTC().Format(time.RFC3339)
			if err := r.Patch(ctx, s, patch); err != nil {
				return 0, err
			}
			r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonLoginUserLeaving, fmt.Sprintf(
				"login pool %s: %s left group %s; pod %s-0 goes in %s", pool, s.Annotations[wellknown.AnnotationLoginUser], sc.Spec.Login.Pools[p].Group, s.Name, grace))
		}
		remaining := grace - r.now().Sub(left)
		if remaining <= 0 {
			if err := r.deleteLoginUser(ctx, sc, s, fmt.Sprintf("they left group %s %s ago", sc.Spec.Login.Pools[p].Group, grace)); err != nil {
				return 0, err
			}
			continue
		}
		if next == 0 || remaining < next {
			next = remaining
		}
	}
	return next, nil
}

// deleteLoginUser deletes a user's StatefulSet; its Secret and Service go with it (owner
// references), their home claim stays (a StatefulSet's claims are retained).
func (r *LoginPools) deleteLoginUser(ctx context.Context, sc *sunkv1.SlurmCluster, s *appsv1.StatefulSet, why string) error {
	if err := r.Delete(ctx, s, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonLoginUserRemoved, fmt.Sprintf(
		"login pool %s: pod %s-0 of %s deleted: %s", s.Labels[wellknown.LabelLoginPool], s.Name, s.Annotations[wellknown.AnnotationLoginUser], why))
	return nil
}
