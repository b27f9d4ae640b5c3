package slurmcluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// validSpec re-checks the spec with the webhook's own rules (internal/validation) and the
// operator's validation settings (a cluster without the webhook, or admitted while it was
// down, is checked all the same). A bad spec sets ConfigApplied=False InvalidSpec naming the fields, and the caller
// renders nothing new: the running cluster keeps its last good configuration.
func (r *Reconciler) validSpec(sc *sunkv1.SlurmCluster, st *status) bool {
	if errs, _ := r.Validation.ValidateSpec(&sc.Spec, field.NewPath("spec")); len(errs) > 0 {
		msg := errs.ToAggregate().Error()
		r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonInvalidSpec, msg)
		st.set(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonInvalidSpec, msg)
		return false
	}
	r.reportUnsafe(sc)
	return true
}

// reportUnsafe records, as a Warning event on the cluster, each new spec.controller.
// unsafeConfKeys (keys sunk keeps that the cluster's extraConf may take over, allowed by the
// operator's --allowed-unsafe-conf-keys): kubectl describe shows who runs outside sunk's
// invariants, and since when.
func (r *Reconciler) reportUnsafe(sc *sunkv1.SlurmCluster) {
	msg := ""
	if keys := sc.Spec.Controller.UnsafeConfKeys; len(keys) > 0 {
		msg = fmt.Sprintf("spec.controller.extraConf may set %s, which sunk keeps for its own invariants (spec.controller.unsafeConfKeys, allowed by the operator's --allowed-unsafe-conf-keys)", strings.Join(keys, ", "))
	}
	if prev, _ := r.unsafeReported.Load(sc.UID); prev == msg {
		return
	}
	r.unsafeReported.Store(sc.UID, msg)
	if msg != "" {
		r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonUnsafeConfKeys, msg)
	}
}
