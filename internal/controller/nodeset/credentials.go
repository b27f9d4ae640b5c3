package nodeset

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// secretState is what the operator found of one named Secret: missing, or its type.
type secretState struct {
	name    string
	missing bool
	typ     corev1.SecretType
}

// credentialsVerdict decides the ContainerCredentials condition from the NodeSet's
// spec.containers.imagePullSecrets as found: ok when each exists and is a dockerconfigjson
// Secret (what the helper reads), else a message naming each that is not.
func credentialsVerdict(found []secretState) (ok bool, msg string) {
	var bad []string
	for _, s := range found {
		switch {
		case s.missing:
			bad = append(bad, fmt.Sprintf("Secret %s does not exist", s.name))
		case s.typ != corev1.SecretTypeDockerConfigJson:
			bad = append(bad, fmt.Sprintf("Secret %s is of type %q, not %s", s.name, s.typ, corev1.SecretTypeDockerConfigJson))
		}
	}
	if len(bad) > 0 {
		return false, "spec.containers.imagePullSecrets: " + strings.Join(bad, "; ") +
			": the compute pods mount them and stay in ContainerCreating until each exists"
	}
	names := make([]string, len(found))
	for i, s := range found {
		names[i] = s.name
	}
	return true, "every Secret of spec.containers.imagePullSecrets exists: " + strings.Join(names, ", ")
}

// checkCredentials sets ContainerCredentials for a NodeSet whose jobs' containers have
// imagePullSecrets (and removes it otherwise), with a Warning event when it turns False, and
// says whether to look again: the operator's cache holds only labelled Secrets, so an admin's
// Secret is read uncached (APIReader) and its creation wakes nothing.
func (r *Reconciler) checkCredentials(ctx context.Context, ns *sunkv1.NodeSet, st *status) (recheck bool, err error) {
	if !ns.ContainersEnabled() || len(ns.Spec.Containers.ImagePullSecrets) == 0 {
		meta.RemoveStatusCondition(&st.conditions, sunkv1.ConditionContainerCredentials)
		return false, nil
	}
	var found []secretState
	for _, s := range ns.Spec.Containers.ImagePullSecrets {
		sec := &corev1.Secret{}
		err := r.apiReader().Get(ctx, types.NamespacedName{Namespace: ns.Namespace, Name: s.Name}, sec)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		found = append(found, secretState{name: s.Name, missing: err != nil, typ: sec.Type})
	}
	ok, msg := credentialsVerdict(found)
	if ok {
		st.set(sunkv1.ConditionContainerCredentials, true, sunkv1.ReasonSecretsFound, msg)
		return false, nil
	}
	st.set(sunkv1.ConditionContainerCredentials, false, sunkv1.ReasonSecretMissing, msg)
	if st.becomes(sunkv1.ConditionContainerCredentials, metav1.ConditionFalse) {
		r.event(ns, corev1.EventTypeWarning, sunkv1.ReasonSecretMissing, "%s", msg)
	}
	return true, nil
}

// apiReader is APIReader, or the cached client where none was given (unit tests).
func (r *Reconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}
