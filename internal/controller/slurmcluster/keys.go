package slurmcluster

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/wellknown"
)

// Key sizes: auth/slurm wants a key with enough entropy (SchedMD suggests 1024 random
// bytes); HS256 wants at least 32.
const (
	authKeyBytes = 1024
	jwtKeyBytes  = 64
)

// ensureKeys creates the auth/slurm and JWT keys, and the login pods' SSH host key when they
// run sshd, when their Secrets are absent. An existing Secret is never replaced: a new key
// would lock every running daemon out (or, for the host key, make every user's ssh refuse
// the login pods). A Secret without its key stops the reconcile with KeyMissing until a
// human fixes it. It returns the JWT keys (the current one, and the previous one during a
// rotation), or nil when the reconcile cannot go on.
func (r *Reconciler) ensureKeys(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, st *status) (*slurmconn.Keys, error) {
	var jwt *slurmconn.Keys
	random := func(size int) func() ([]byte, error) { return func() ([]byte, error) { return randomBytes(size) } }
	keys := []clusterKey{
		{n.AuthSecret, render.AuthKeyName, random(authKeyBytes)},
		{n.JWTSecret, wellknown.SecretJWTKey, random(jwtKeyBytes)},
	}
	if render.SSHEnabled(sc) {
		keys = append(keys, clusterKey{n.SSHHostKeySecret, render.SSHHostKeyName, sshHostKey})
	}
	for _, k := range keys {
		data, err := r.ensureSecretKey(ctx, sc, k.secret, k.key, k.generate)
		if err != nil {
			return nil, err
		}
		if data[k.key] == nil {
			msg := fmt.Sprintf("Secret %s exists without the key %q; sunk does not replace existing keys, restore it or delete the Secret", k.secret, k.key)
			r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonKeyMissing, msg)
			st.set(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonKeyMissing, msg)
			return nil, nil
		}
		if k.secret == n.JWTSecret {
			jwt = &slurmconn.Keys{Current: data[k.key], Previous: data[wellknown.SecretJWTPreviousKey]}
		}
	}
	return jwt, nil
}

// clusterKey is a key the operator makes once per cluster: a Secret, its key, how to make it.
type clusterKey struct {
	secret, key string
	generate    func() ([]byte, error)
}

// sshHostKey is a new ed25519 host key in OpenSSH's private key format, which sshd reads.
func sshHostKey() ([]byte, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(block), nil
}

// ensureSecretKey returns the data of a Secret, creating the Secret with generate() as its key
// when it does not exist; the key is absent when the Secret exists without it. The Secret is retained: no owner
// reference, so that an accidental `kubectl delete slurmcluster` leaves the keys the surviving
// compute pods and the saved job state need, and a SlurmCluster re-created under the same name
// takes them up again (docs/slurmcluster.md, "Deleting a cluster").
func (r *Reconciler) ensureSecretKey(ctx context.Context, sc *sunkv1.SlurmCluster, name, key string, generate func() ([]byte, error)) (map[string][]byte, error) {
	s := &corev1.Secret{}
	// An admin may have made the Secret (to keep a key across clusters): it is not labelled,
	// so not in the cache.
	err := r.notOnlyOwned().Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: name}, s)
	if err == nil {
		if err := r.adopt(ctx, sc, s); err != nil {
			return nil, err
		}
		return s.Data, r.release(ctx, sc, s)
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	data, err := generate()
	if err != nil {
		return nil, err
	}
	s = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sc.Namespace, Labels: map[string]string{wellknown.LabelCluster: sc.Name}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{key: data},
	}
	if err := r.Create(ctx, s); err != nil {
		return nil, err
	}
	r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonKeyCreated, fmt.Sprintf("generated %s in Secret %s", key, name))
	return s.Data, nil
}

// adopt labels a Secret that existed before the cluster as the cluster's, once, and says so in
// an event: its key becomes the cluster's, and whoever made it, or may read Secrets in the
// namespace, holds that key. A Secret sunk made, or labelled already, passes unchanged.
func (r *Reconciler) adopt(ctx context.Context, sc *sunkv1.SlurmCluster, s *corev1.Secret) error {
	if s.Labels[wellknown.LabelCluster] == sc.Name {
		return nil
	}
	patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[wellknown.LabelCluster] = sc.Name
	if err := r.Patch(ctx, s, patch); err != nil {
		return fmt.Errorf("labelling the existing Secret %s as the cluster's: %w", s.Name, err)
	}
	r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonKeyAdopted, fmt.Sprintf(
		"took up Secret %s, which existed before this cluster, and labelled it %s=%s: its keys are the cluster's, and whoever may read Secrets in namespace %s holds them",
		s.Name, wellknown.LabelCluster, sc.Name, sc.Namespace))
	return nil
}

// ensureSlurmdbdConf renders slurmdbd.conf (with the database password) into its Secret
// and returns a hash that rolls slurmdbd when the file changes.
func (r *Reconciler) ensureSlurmdbdConf(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names) (string, error) {
	var password []byte
	if ext := sc.Spec.Accounting.External; sc.Spec.Accounting.Mode == sunkv1.AccountingExternal && ext != nil {
		s := &corev1.Secret{}
		if err := r.notOnlyOwned().Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: ext.PasswordSecretRef.Name}, s); err != nil {
			return "", fmt.Errorf("reading the external database password: %w", err)
		}
		// The author of the SlurmCluster chooses the host the password is sent to: only a
		// Secret an admin marked for that is read, never any Secret of the namespace.
		if s.Labels[wellknown.LabelDatabasePassword] != "true" {
			return "", fmt.Errorf("secret %s (spec.accounting.external.passwordSecretRef) lacks the label %s=true that allows sending it to a database host", ext.PasswordSecretRef.Name, wellknown.LabelDatabasePassword)
		}
		if password = s.Data[ext.PasswordSecretRef.Key]; password == nil {
			return "", fmt.Errorf("secret %s has no key %q (spec.accounting.external.passwordSecretRef)", ext.PasswordSecretRef.Name, ext.PasswordSecretRef.Key)
		}
		if err := render.CheckStoragePassword(string(password)); err != nil {
			return "", fmt.Errorf("secret %s key %q (spec.accounting.external.passwordSecretRef): %w", ext.PasswordSecretRef.Name, ext.PasswordSecretRef.Key, err)
		}
	} else {
		data, err := r.ensureSecretKey(ctx, sc, n.DatabaseSecret, render.DBPasswordKey, func() ([]byte, error) {
			b, err := randomBytes(24)
			return []byte(base64.RawURLEncoding.EncodeToString(b)), err
		})
		if err != nil {
			return "", err
		}
		password = data[render.DBPasswordKey]
		if password == nil {
			return "", fmt.Errorf("secret %s exists without the key %q", n.DatabaseSecret, render.DBPasswordKey)
		}
	}
	conf := render.SlurmdbdConf(sc, n, string(password))
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: n.SlurmdbdSecret, Namespace: n.Namespace, Labels: map[string]string{wellknown.LabelCluster: sc.Name}},
		Data:       map[string][]byte{render.SlurmdbdConfKey: []byte(conf)},
	}
	if err := r.apply(ctx, sc, s); err != nil {
		return "", err
	}
	return render.HashStrings(conf), nil
}

func randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := rand.Read(b)
	return b, err
}
