package validation

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AllowAllUnsafeConfKeys in Options.AllowedUnsafeConfKeys allows every key.
const AllowAllUnsafeConfKeys = "*"

// Options are the operator's own validation settings. The webhook and the controllers'
// re-check must be given the same, or the controller would refuse what admission let in.
type Options struct {
	// AllowedUnsafeConfKeys are the slurm.conf keys sunk keeps that a SlurmCluster may take
	// over by listing them in spec.controller.unsafeConfKeys (case-insensitive;
	// AllowAllUnsafeConfKeys allows all). They are the operator's flag
	// --allowed-unsafe-conf-keys, the sunk chart's operator.allowedUnsafeConfKeys: set by
	// whoever installs the operator, not by the authors of SlurmClusters. Empty: none.
	AllowedUnsafeConfKeys []string
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
