package slurmcluster

// The cluster's TLS Secret (spec.tls): its CA and the serving certificate of slurmrestd's
// terminator and the node watchers, made by the operator and renewed before they expire
// (pkg/clustertls decides when). Owned by the cluster: unlike its keys, nothing outlives it
// that needs them, and a re-created cluster gets a new CA that its clients read anew.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/wellknown"
)

// tlsRecheck bounds how long a reconcile waits to look at the certificates again: the
// renewal time is months away, and a requeue that far is as good as none.
const tlsRecheck = 24 * time.Hour

// ensureTLS keeps the cluster's TLS Secret current: made when absent, the serving certificate
// renewed past 2/3 of its life or when the names clients use changed, the CA likewise (and the
// certificate with it). It returns when to look again, and false when the reconcile cannot go
// on: the pods would mount a Secret that is not the cluster's.
func (r *Reconciler) ensureTLS(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, st *status) (time.Duration, bool, error) {
	if !n.TLS {
		return 0, true, nil
	}
	s := &corev1.Secret{}
	var data map[string][]byte
	switch err := r.Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: n.TLSSecret}, s); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return 0, false, err
	case !metav1.IsControlledBy(s, sc):
		r.tlsFailed(sc, st, fmt.Sprintf("Secret %s exists and is not the cluster's: sunk does not replace it; delete it, or set spec.tls.enabled to false", n.TLSSecret))
		return 0, false, nil
	default:
		data = s.Data
	}
	now := time.Now()
	names := n.TLSNames()
	d := clustertls.Decide(data, names, now)
	if !d.NewCA && !d.NewCert {
		return min(time.Until(d.RenewAt), tlsRecheck), true, nil
	}
	renewed, err := clustertls.Renewed(n.Cluster, data, d, names, now)
	if err != nil {
		r.tlsFailed(sc, st, "issuing the certificates: "+err.Error())
		return 0, false, nil
	}
	desired := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: n.TLSSecret, Namespace: n.Namespace, Labels: map[string]string{wellknown.LabelCluster: sc.Name}},
		Type:       corev1.SecretTypeTLS,
		Data:       renewed,
	}
	if err := r.apply(ctx, sc, desired); err != nil {
		return 0, false, err
	}
	what := "a serving certificate"
	if d.NewCA {
		what = "a CA and a serving certificate"
	}
	r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonTLSIssued, fmt.Sprintf("issued %s into Secret %s: %s", what, n.TLSSecret, d.Reason))
	return tlsRecheck, true, nil
}

// tlsFailed says why the cluster has no usable certificate, on the cluster and in ConfigApplied.
func (r *Reconciler) tlsFailed(sc *sunkv1.SlurmCluster, st *status, msg string) {
	r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonTLSFailed, msg)
	st.set(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonTLSFailed, msg)
}
