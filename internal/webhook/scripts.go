package webhook

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// validateConfigMapScripts checks, at admission, the prolog and epilog scripts that come from
// ConfigMaps which exist already, as ValidateScript checks inline ones: a bad one is refused
// with the field, instead of only showing later in the cluster's conditions. A ConfigMap that
// does not exist yet or cannot be read passes: the controller checks every script each time
// it reads it, which also covers later edits of the ConfigMap.
func validateConfigMapScripts(ctx context.Context, r client.Reader, sc *sunkv1.SlurmCluster, path *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	for _, kind := range []struct {
		name    string
		scripts []sunkv1.Script
	}{{"prolog", sc.Spec.Prolog}, {"epilog", sc.Spec.Epilog}} {
		for i, s := range kind.scripts {
			ref := s.ConfigMapKeyRef
			if ref == nil {
				continue
			}
			cm := &corev1.ConfigMap{}
			if err := r.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: ref.Name}, cm); err != nil {
				continue
			}
			text, ok := cm.Data[ref.Key]
			if !ok {
				continue
			}
			if err := ValidateScript(text); err != nil {
				errs = append(errs, field.Invalid(path.Child(kind.name).Index(i).Child("configMapKeyRef"), ref.Name+"/"+ref.Key, err.Error()))
			}
		}
	}
	return errs
}
