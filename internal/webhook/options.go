package webhook

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// AllowAllUnsafeConfKeys in Options.AllowedUnsafeConfKeys allows every key.
const AllowAllUnsafeConfKeys = "*"

// Options are the operator's own admission settings. The webhook and the controllers'
// re-check must be given the same, or the controller would refuse what admission let in.
type Options struct {
	// AllowedUnsafeConfKeys are the slurm.conf keys sunk keeps that a SlurmCluster may take
	// over by listing them in spec.controller.unsafeConfKeys (case-insensitive;
	// AllowAllUnsafeConfKeys allows all). They are the operator's flag
	// --allowed-unsafe-conf-keys, the sunk chart's operator.allowedUnsafeConfKeys: set by
	// whoever installs the operator, not by the authors of SlurmClusters. Empty: none.
	AllowedUnsafeConfKeys []string
	// Authors may write the fields that give root on compute hosts (authors.go): the
	// operator's flags --privileged-authors-*, the sunk chart's operator.privilegedAuthors.
	Authors Authors
}

// allowsUnsafe says whether a SlurmCluster may take over the key.
func (o Options) allowsUnsafe(key string) bool {
	return slices.ContainsFunc(o.AllowedUnsafeConfKeys, func(k string) bool {
		return k == AllowAllUnsafeConfKeys || strings.EqualFold(k, key)
	})
}

// unsafeKeys are the keys of spec.controller.unsafeConfKeys the operator allows (lower
// case), and an error for each it does not.
func (o Options) unsafeKeys(keys []string, p *field.Path) (map[string]bool, field.ErrorList) {
	allowed := map[string]bool{}
	var errs field.ErrorList
	for i, k := range keys {
		if !o.allowsUnsafe(k) {
			errs = append(errs, field.Forbidden(p.Index(i), "this operator does not let SlurmClusters take over "+k+
				": the admin who installs it lists the key in --allowed-unsafe-conf-keys (the sunk chart's operator.allowedUnsafeConfKeys)"))
			continue
		}
		allowed[strings.ToLower(k)] = true
	}
	return allowed, errs
}

// auditUnsafe writes one log line per admitted SlurmCluster that takes over keys sunk keeps:
// who, which object, which keys. (The admission warning reaches the client; this line is
// the operator's own record.)
func auditUnsafe(ctx context.Context, sc *sunkv1.SlurmCluster) {
	if len(sc.Spec.Controller.UnsafeConfKeys) == 0 {
		return
	}
	user, op := "", ""
	if req, err := admission.RequestFromContext(ctx); err == nil {
		user, op = req.UserInfo.Username, string(req.Operation)
	}
	ctrl.Log.WithName("admission").Info("SlurmCluster takes over slurm.conf keys sunk keeps",
		"namespace", sc.Namespace, "name", sc.Name, "operation", op, "user", user, "unsafeConfKeys", sc.Spec.Controller.UnsafeConfKeys)
}
