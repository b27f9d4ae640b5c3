package plugin

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// secretKeySyncWait bounds how long New waits for the JWT key Secret's first read, so that the
// first Slurm requests are not refused for want of a key; past it they fail until it is read.
const secretKeySyncWait = 30 * time.Second

// secretKeys reads one of the cluster's Secrets (the JWT key Secret, the TLS Secret's CA)
// through the API, from a cache of that one Secret. The scheduler runs in a namespace of its own (the release's), not the Slurm cluster's,
// so that nobody who may create pods beside the cluster's keys can borrow its cluster-wide
// account (docs/security.md): a Secret is mounted only in its own namespace, so it is watched
// instead, with a Role that grants that one Secret (charts/sunk, scheduler.yaml).
type secretKeys struct {
	namespace, name string
	what            string // "the JWT key Secret", for errors
	synced          cache.InformerSynced
	secrets         corelisters.SecretNamespaceLister
}

// newSecretKeys starts the cache of the JWT key Secret namespace/name; it stops with ctx.
func newSecretKeys(ctx context.Context, cs kubernetes.Interface, namespace, name string) *secretKeys {
	return newSecretCache(ctx, cs, namespace, name, "the JWT key Secret")
}

// newSecretCache starts the cache of Secret namespace/name, called what in errors; it stops
// with ctx.
func newSecretCache(ctx context.Context, cs kubernetes.Interface, namespace, name, what string) *secretKeys {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			// The Role grants the one Secret by name: a list or watch must name it too.
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := f.Core().V1().Secrets()
	k := &secretKeys{namespace: namespace, name: name, what: what, synced: inf.Informer().HasSynced, secrets: inf.Lister().Secrets(namespace)}
	f.Start(ctx.Done())
	wctx, cancel := context.WithTimeout(ctx, secretKeySyncWait)
	defer cancel()
	cache.WaitForCacheSync(wctx.Done(), k.synced)
	return k
}

// read is a slurm.KeyReader: the keys of the Secret as the cache has it, current first.
func (k *secretKeys) read() ([][]byte, error) {
	s, err := k.get()
	if err != nil {
		return nil, err
	}
	return secretJWTKeys(s)
}

// get is the Secret as the cache has it.
func (k *secretKeys) get() (*v1.Secret, error) {
	if !k.synced() {
		return nil, fmt.Errorf("%s %s/%s has not been read yet", k.what, k.namespace, k.name)
	}
	s, err := k.secrets.Get(k.name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %s/%s does not exist (the operator makes it with the SlurmCluster)", k.what, k.namespace, k.name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", k.what, k.namespace, k.name, err)
	}
	return s, nil
}

// secretJWTKeys are the keys of a JWT key Secret, current first; the current one must be there.
func secretJWTKeys(s *v1.Secret) ([][]byte, error) {
	cur := s.Data[wellknown.SecretJWTKey]
	if len(cur) == 0 {
		return nil, fmt.Errorf("the JWT key Secret %s/%s has no %s", s.Namespace, s.Name, wellknown.SecretJWTKey)
	}
	keys := [][]byte{cur}
	if prev := s.Data[wellknown.SecretJWTPreviousKey]; len(prev) > 0 {
		keys = append(keys, prev)
	}
	return keys, nil
}

// jwtTokens is the plugin's token source: from the Secret named by args.JWTKeySecret, or from
// the file args.JWTKeyFile (a scheduler run outside the cluster, and the integration tests).
func jwtTokens(ctx context.Context, cs kubernetes.Interface, args Args) (*slurm.JWTSource, error) {
	if args.JWTKeySecret == "" {
		return slurm.NewJWTSourceFromFile(args.SlurmUser, args.JWTKeyFile)
	}
	return slurm.NewJWTSourceFromReader(args.SlurmUser, newSecretKeys(ctx, cs, args.Namespace, args.JWTKeySecret).read)
}
