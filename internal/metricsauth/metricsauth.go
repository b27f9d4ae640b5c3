// Package metricsauth guards the operator's and the syncer's /metrics: only a caller whose
// bearer token the API server authenticates (TokenReview) and allows to get the path
// (SubjectAccessReview, a non-resource URL) is answered, as kube-scheduler guards its own. The
// metrics name nodes, users, accounts and jobs (the Slurm exporter's series) and must not be
// read by any pod that can reach the port. It is controller-runtime's metrics filter without
// k8s.io/apiserver, which that library's own filter pulls in.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	// allowedFor and deniedFor are how long a verdict on a token is kept: a scrape every 30 s
	// costs the API server two reviews a minute at most, and a revoked grant or token stops
	// working within a minute.
	allowedFor = time.Minute
	deniedFor  = 10 * time.Second
	// maxVerdicts bounds the cache; past it, it starts over.
	maxVerdicts = 1024
	// reviewTimeout bounds the two reviews of one request.
	reviewTimeout = 10 * time.Second
)

// Reviewer is what the filter asks the API server: TokenReviews and SubjectAccessReviews.
type Reviewer interface {
	CreateTokenReview(ctx context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error)
	CreateSubjectAccessReview(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error)
}

// FilterProvider is metricsserver.Options.FilterProvider: the filter, asking the API server
// of c.
func FilterProvider(c *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	cs, err := kubernetes.NewForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization: %w", err)
	}
	return NewFilter(apiReviewer{cs}), nil
}

// NewFilter is the filter asking r.
func NewFilter(r Reviewer) metricsserver.Filter {
	g := &guard{reviews: r, verdicts: map[[32]byte]verdict{}}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			v := g.check(req)
			if v.status != http.StatusOK {
				log.V(1).Info("metrics request refused", "remote", req.RemoteAddr, "status", v.status, "why", v.why)
				http.Error(w, v.why, v.status)
				return
			}
			next.ServeHTTP(w, req)
		}), nil
	}
}

type guard struct {
	reviews  Reviewer
	mu       sync.Mutex
	verdicts map[[32]byte]verdict // by sha256 of token, verb and path
}

type verdict struct {
	status int
	why    string
	until  time.Time
}

// check says whether the request's caller may have the answer: 200, or 401 (no token, or one
// the API server does not know), 403 (a caller not allowed the path), 503 (the API server could
// not be asked).
func (g *guard) check(req *http.Request) verdict {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return verdict{status: http.StatusUnauthorized, why: "Unauthorized: /metrics needs a bearer token the Kubernetes API server authenticates"}
	}
	verb := strings.ToLower(req.Method)
	key := sha256.Sum256([]byte(verb + "\x00" + req.URL.Path + "\x00" + token))
	now := time.Now()
	g.mu.Lock()
	if v, ok := g.verdicts[key]; ok && now.Before(v.until) {
		g.mu.Unlock()
		return v
	}
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
	defer cancel()
	v := g.review(ctx, token, verb, req.URL.Path)
	if v.status == http.StatusServiceUnavailable {
		return v // not kept: the next request asks again
	}
	v.until = now.Add(deniedFor)
	if v.status == http.StatusOK {
		v.until = now.Add(allowedFor)
	}
	g.mu.Lock()
	if len(g.verdicts) >= maxVerdicts {
		clear(g.verdicts)
	}
	g.verdicts[key] = v
	g.mu.Unlock()
	return v
}

func (g *guard) review(ctx context.Context, token, verb, path string) verdict {
	tr, err := g.reviews.CreateTokenReview(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}})
	if err != nil {
		return verdict{status: http.StatusServiceUnavailable, why: "cannot authenticate the caller with the Kubernetes API server: " + err.Error()}
	}
	if !tr.Status.Authenticated {
		return verdict{status: http.StatusUnauthorized, why: "Unauthorized: the Kubernetes API server does not know this token"}
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := g.reviews.CreateSubjectAccessReview(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}})
	if err != nil {
		return verdict{status: http.StatusServiceUnavailable, why: "cannot authorize the caller with the Kubernetes API server: " + err.Error()}
	}
	if !sar.Status.Allowed {
		return verdict{status: http.StatusForbidden, why: fmt.Sprintf("Forbidden: user %q may not %s %s (grant it the nonResourceURL, e.g. with the sunk chart's ClusterRole <release>-metrics-reader)", u.Username, verb, path)}
	}
	return verdict{status: http.StatusOK}
}

// apiReviewer asks the API server of a clientset.
type apiReviewer struct{ cs kubernetes.Interface }

func (a apiReviewer) CreateTokenReview(ctx context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	return a.cs.AuthenticationV1().TokenReviews().Create(ctx, tr, metav1.CreateOptions{})
}

func (a apiReviewer) CreateSubjectAccessReview(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
	return a.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
}
