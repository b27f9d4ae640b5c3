package kube

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheThenAPIReader reads an object from the cache, and from the API server when the cache
// does not have it. The operator's cache holds only the objects it labels
// (cmdutil.OperatorCacheOptions); the few objects it reads that someone else made (a
// ConfigMap a prolog names, a key Secret an admin created) are found by the second read, and
// so is an object the cache has not seen yet.
type CacheThenAPIReader struct {
	Cache client.Reader
	API   client.Reader
}

// Get reads key into obj.
func (r CacheThenAPIReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Cache.Get(ctx, key, obj, opts...)
	if !apierrors.IsNotFound(err) {
		return err
	}
	return r.API.Get(ctx, key, obj, opts...)
}

// List lists from the API server: a list of objects the operator does not own would be
// incomplete in the cache.
func (r CacheThenAPIReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.API.List(ctx, list, opts...)
}
