package kube

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
)

// QuietConflict turns a reconcile that lost an optimistic-lock race (someone else wrote the
// object since the cache showed it: the syncer's condition on a SlurmCluster, a StatefulSet
// controller's status) into a plain requeue. It is the normal course of concurrent writers,
// not an error worth a stack trace in the log.
func QuietConflict(result ctrl.Result, err error) (ctrl.Result, error) {
	if err != nil && apierrors.IsConflict(err) {
		return ctrl.Result{Requeue: true}, nil
	}
	return result, err
}
