// Package v1alpha1 holds sunk's API: SlurmCluster (the Slurm control plane) and NodeSet
// (compute pods as dynamic Slurm nodes).
//
// +kubebuilder:object:generate=true
// +groupName=sunk.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of every sunk resource.
	GroupVersion = schema.GroupVersion{Group: "sunk.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
