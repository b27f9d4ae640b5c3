package slurmcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
)

type missingScriptError struct{ msg string }

func (e *missingScriptError) Error() string { return e.msg }

// resolveScripts reads the prolog and epilog scripts (inline or from ConfigMaps).
func (r *Reconciler) resolveScripts(ctx context.Context, sc *sunkv1.SlurmCluster, n render.Names) (render.ConfigInputs, error) {
	in := render.ConfigInputs{Names: n}
	var err error
	if in.Prolog, err = r.resolve(ctx, sc.Namespace, "prolog", sc.Spec.Prolog); err != nil {
		return in, err
	}
	in.Epilog, err = r.resolve(ctx, sc.Namespace, "epilog", sc.Spec.Epilog)
	return in, err
}

func (r *Reconciler) resolve(ctx context.Context, ns, kind string, scripts []sunkv1.Script) ([]render.ResolvedScript, error) {
	var out []render.ResolvedScript
	for i, s := range scripts {
		if s.Inline != nil {
			out = append(out, render.ResolvedScript{Name: s.Name, Text: *s.Inline})
			continue
		}
		ref := s.ConfigMapKeyRef
		cm := &corev1.ConfigMap{}
		err := r.notOnlyOwned().Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, cm)
		if apierrors.IsNotFound(err) {
			return nil, &missingScriptError{fmt.Sprintf("spec.%s[%d].configMapKeyRef: ConfigMap %s not found", kind, i, ref.Name)}
		}
		if err != nil {
			return nil, err
		}
		text, ok := cm.Data[ref.Key]
		if !ok {
			return nil, &missingScriptError{fmt.Sprintf("spec.%s[%d].configMapKeyRef: ConfigMap %s has no key %q", kind, i, ref.Name, ref.Key)}
		}
		out = append(out, render.ResolvedScript{Name: s.Name, Text: text})
	}
	return out, nil
}
