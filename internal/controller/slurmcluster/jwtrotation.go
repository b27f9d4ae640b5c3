package slurmcluster

// Following a JWT key rotation (docs/security.md, "Rotating keys").
//
// slurmctld holds one HS256 key. It reads AuthAltParameters=jwt_key at start and at every
// reconfigure, since Slurm 24.11's reconfigure re-executes slurmctld and auth/jwt's init()
// reads the file again (src/plugins/auth/jwt/auth_jwt.c, src/slurmctld/controller.c). The file
// is the key Secret's own volume file, which kubelet refreshes in place. A rotation puts the
// new key in jwt.key and the old one in jwt.key.previous, in one Secret update; sunk's clients
// mint with the new key and fall back to the old one while slurmctld refuses the new one
// (slurm.JWTSource), so nothing fails closed meanwhile. What is left is here: see that
// slurmctld has loaded the new key, reconfigure it when it has not, and drop the old key once
// it has.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

const (
	jwtReconfigureEvery   = 30 * time.Second
	jwtPollWhileRotating  = 5 * time.Second
	jwtKeyIDHexCharacters = 16
)

// keyID names a key without revealing it: a prefix of its SHA-256.
func keyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:])[:jwtKeyIDHexCharacters]
}

// jwtState is what the operator knows of one cluster's JWT key in slurmctld.
type jwtState struct {
	mu           sync.Mutex
	loaded       string    // keyID of the key slurmctld was last seen to accept
	reconfigured time.Time // the last reconfigure made for a new key
}

// jwtStep is what to do next about a cluster's JWT key.
type jwtStep int

const (
	jwtSteady       jwtStep = iota // slurmctld accepts the current key; nothing left to do
	jwtDropPrevious                // it does, and the Secret still holds the key it replaced
	jwtReconfigure                 // it refuses the current key: reconfigure it (with the old key)
	jwtWait                        // ask again later
	jwtStuck                       // it refuses the current key and there is no old key to reach it with
)

// nextJWTStep decides from the probe of the current key (nil: accepted), whether the Secret
// still holds a previous key and is the operator's to change, and how long ago the last
// reconfigure for a new key was. Slurm's own refusal is the only answer that says anything
// about the key; unavailability says nothing, and a reconfigure every poll would re-execute
// slurmctld while kubelet has not yet delivered the new file.
func nextJWTStep(probe error, hasPrevious, ownSecret bool, sinceReconfigure time.Duration) jwtStep {
	switch {
	case probe == nil && hasPrevious && ownSecret:
		return jwtDropPrevious
	case probe == nil:
		return jwtSteady
	case !errors.Is(probe, slurm.ErrUnauthorized):
		return jwtWait
	case !hasPrevious:
		return jwtStuck
	case sinceReconfigure < jwtReconfigureEvery:
		return jwtWait
	}
	return jwtReconfigure
}

// followJWTKey brings slurmctld to the Secret's current JWT key. It asks slurmctld only when
// the key differs from the one last seen accepted, or a previous key is still in the Secret.
func (r *Reconciler) followJWTKey(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, keys slurmconn.Keys) (ctrl.Result, error) {
	v, _ := r.jwt.LoadOrStore(sc.UID, &jwtState{})
	state := v.(*jwtState)
	state.mu.Lock()
	defer state.mu.Unlock()
	id := keyID(keys.Current)
	hasPrevious := len(keys.Previous) > 0
	if state.loaded == id && !hasPrevious {
		return ctrl.Result{}, nil
	}
	secret := &corev1.Secret{}
	if err := r.notOnlyOwned().Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: n.JWTSecret}, secret); err != nil {
		return ctrl.Result{}, err
	}
	// An admin's Secret (one the operator did not make) is never written.
	ownSecret := secret.Labels[wellknown.LabelCluster] == sc.Name

	probe := r.Slurm.Probe(ctx, n, sc.Spec.RestAPI.Version, keys.Current)
	switch nextJWTStep(probe, hasPrevious, ownSecret, time.Since(state.reconfigured)) {
	case jwtSteady:
		if state.loaded != "" && state.loaded != id {
			r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonJWTKeyLoaded, "slurmctld accepts the JWT key "+id)
		}
		state.loaded = id
		return ctrl.Result{}, nil
	case jwtDropPrevious:
		patch := client.MergeFrom(secret.DeepCopy())
		delete(secret.Data, wellknown.SecretJWTPreviousKey)
		if err := r.Patch(ctx, secret, patch); err != nil {
			return ctrl.Result{}, err
		}
		state.loaded = id
		r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonJWTKeyPrevious,
			fmt.Sprintf("slurmctld accepts the JWT key %s; dropped %s from Secret %s", id, wellknown.SecretJWTPreviousKey, n.JWTSecret))
		return ctrl.Result{}, nil
	case jwtStuck:
		msg := fmt.Sprintf("slurmctld refuses the JWT key %s of Secret %s, and the Secret has no %s to reach it with: put the key slurmctld loaded back as %s, or restart slurmctld",
			id, n.JWTSecret, wellknown.SecretJWTPreviousKey, wellknown.SecretJWTPreviousKey)
		r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonJWTKeyUnusable, msg)
		return ctrl.Result{RequeueAfter: jwtReconfigureEvery}, nil
	case jwtWait:
		log.FromContext(ctx).V(1).Info("waiting for slurmctld to load the JWT key", "key", id, "probe", fmt.Sprint(probe))
		return ctrl.Result{RequeueAfter: jwtPollWhileRotating}, nil
	}
	// jwtReconfigure. Naming the key on the pod makes kubelet refresh its volumes now rather
	// than at its next periodic sync; the reconfigure goes through the pool's client, which
	// falls back to the previous key that slurmctld still holds.
	pod := &corev1.Pod{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: n.ControllerPod(0)}, pod); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.annotate(ctx, pod, wellknown.AnnotationJWTKey, id); err != nil {
		return ctrl.Result{}, err
	}
	sl, err := r.slurmFor(ctx, sc, n, keys)
	if err != nil {
		return ctrl.Result{}, err
	}
	state.reconfigured = time.Now()
	if err := r.reconfigure(ctx, sc, sl, "to load the new JWT key "+id); err != nil {
		return ctrl.Result{RequeueAfter: jwtPollWhileRotating}, nil
	}
	r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonJWTKeyPending, "slurmctld refused the JWT key "+id+": reconfigured it to load the key")
	return ctrl.Result{RequeueAfter: jwtPollWhileRotating}, nil
}

// annotate sets an annotation on the slurmctld pod unless it has the value already. Any update
// of the pod also makes kubelet refresh its ConfigMap and Secret volumes now.
func (r *Reconciler) annotate(ctx context.Context, pod *corev1.Pod, key, value string) error {
	if pod.Annotations[key] == value {
		return nil
	}
	patch := client.MergeFrom(pod.DeepCopy())
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[key] = value
	return r.Patch(ctx, pod, patch)
}
