package slurmcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/validation"
)

// scriptError is a prolog or epilog the controller cannot use: its ConfigMap or key is
// missing (sunkv1.ReasonScriptNotFound), or its text fails the checks an inline script passes at
// admission (sunkv1.ReasonInvalidScript). Either way nothing new is rendered, so the scripts
// ConfigMap keeps the last good scripts.
type scriptError struct{ reason, msg string }

func (e *scriptError) Error() string { return e.msg }

// resolveScripts reads the prolog and epilog scripts (inline or from ConfigMaps). A script
// from a ConfigMap passes the checks an inline one passes at admission, every time the
// ConfigMap is read (its edits reach no webhook of sunk's): it runs as root on every node.
func (r *Reconciler) resolveScripts(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names) (render.ConfigInputs, error) {
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
			return nil, &scriptError{sunkv1.ReasonScriptNotFound, fmt.Sprintf("spec.%s[%d].configMapKeyRef: ConfigMap %s not found", kind, i, ref.Name)}
		}
		if err != nil {
			return nil, err
		}
		text, ok := cm.Data[ref.Key]
		if !ok {
			return nil, &scriptError{sunkv1.ReasonScriptNotFound, fmt.Sprintf("spec.%s[%d].configMapKeyRef: ConfigMap %s has no key %q", kind, i, ref.Name, ref.Key)}
		}
		if err := validation.ValidateScript(text); err != nil {
			return nil, &scriptError{sunkv1.ReasonInvalidScript, fmt.Sprintf("spec.%s[%d].configMapKeyRef: ConfigMap %s key %q: %v (the last good scripts stay in place)", kind, i, ref.Name, ref.Key, err)}
		}
		out = append(out, render.ResolvedScript{Name: s.Name, Text: text})
	}
	return out, nil
}
