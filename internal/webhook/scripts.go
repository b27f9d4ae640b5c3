package webhook

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/validation"
)

// validateConfigMapScripts checks, at admission, the prolog and epilog scripts that come from
// ConfigMaps which exist already, with validation.ValidateScript as inline ones: a bad one is
// refused with the field, instead of only showing later in the cluster's conditions. A
// ConfigMap that does not exist yet or cannot be read passes: the controller checks every
// script each time it reads it, which also covers later edits of the ConfigMap. (Admission's,
// not internal/validation's: validation judges a spec by itself, without the API, and the
// controller reads the ConfigMaps its own way, where a missing one stops the render.)
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
			if err := validation.ValidateScript(text); err != nil {
				errs = append(errs, field.Invalid(path.Child(kind.name).Index(i).Child("configMapKeyRef"), ref.Name+"/"+ref.Key, err.Error()))
			}
		}
	}
	return errs
}
