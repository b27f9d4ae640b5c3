// Package cmdutil holds what sunk's commands share in their setup.
package cmdutil

import (
	"flag"
	"os"
	"strings"

	"github.com/go-logr/logr"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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

// ParseFlags adds the logging flags, parses the command line and starts logging; it returns
// the setup logger.
func ParseFlags() logr.Logger {
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	return ctrl.Log.WithName("setup")
}

// serviceAccountNamespace is where kubelet mounts the namespace of a pod's service account.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// OwnNamespace is the namespace of the pod this process runs in; empty outside a pod.
func OwnNamespace() string {
	b, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
