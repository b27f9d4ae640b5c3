package kube

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// failingReader answers every Get with err.
type failingReader struct {
	client.Reader
	err error
}

func (f failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return f.err
}

func TestCacheThenAPIReader(t *testing.T) {
	ctx := context.Background()
	adminKey := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "slurm", Name: "c1-jwt-key"}, Data: map[string][]byte{"jwt.key": []byte("k")}}
	key := client.ObjectKeyFromObject(adminKey)

	// Not in the (label-selected) cache: read from the API server.
	r := CacheThenAPIReader{Cache: fake.NewClientBuilder().Build(), API: fake.NewClientBuilder().WithObjects(adminKey).Build()}
	var got corev1.Secret
	if err := r.Get(ctx, key, &got); err != nil || string(got.Data["jwt.key"]) != "k" {
		t.Fatalf("Get = %v, %v; want the API server's Secret", err, got.Data)
	}
	// A cache error other than NotFound is the answer: the API server is not asked.
	broken := errors.New("cache broken")
	r = CacheThenAPIReader{Cache: failingReader{err: broken}, API: fake.NewClientBuilder().WithObjects(adminKey).Build()}
	if err := r.Get(ctx, key, &corev1.Secret{}); !errors.Is(err, broken) {
		t.Errorf("Get = %v, want the cache's error", err)
	}
	// Missing in both: NotFound.
	r = CacheThenAPIReader{Cache: fake.NewClientBuilder().Build(), API: fake.NewClientBuilder().Build()}
	if err := r.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get = %v, want NotFound", err)
	}
}
