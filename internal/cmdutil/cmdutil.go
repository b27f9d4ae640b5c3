// Package cmdutil holds what sunk's commands share in their setup.
package cmdutil

import (
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// Scheme knows Kubernetes' built-in types and sunk's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	Must(clientgoscheme.AddToScheme(s))
	Must(sunkv1.AddToScheme(s))
	return s
}

// Must ends the command when setup fails.
func Must(err error) {
	if err != nil {
		ctrl.Log.Error(err, "setup failed")
		os.Exit(1)
	}
}
