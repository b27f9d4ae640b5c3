package metricsauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// fakeReviewer answers as an API server would for three tokens: "reader" (a user allowed get
// /metrics), "other" (a user who is not) and anything else (unknown); down fails every review.
type fakeReviewer struct {
	down    bool
	reviews int
}

func (f *fakeReviewer) CreateTokenReview(_ context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	f.reviews++
	if f.down {
		return nil, errors.New("connection refused")
	}
	out := tr.DeepCopy()
	switch tr.Spec.Token {
	case "reader", "other":
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
			Username: "system:serviceaccount:monitoring:" + tr.Spec.Token, Groups: []string{"system:serviceaccounts"}}}
	}
	return out, nil
}

func (f *fakeReviewer) CreateSubjectAccessReview(_ context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
	out := sar.DeepCopy()
	a := sar.Spec.NonResourceAttributes
	out.Status.Allowed = sar.Spec.User == "system:serviceaccount:monitoring:reader" && a != nil && a.Path == "/metrics" && a.Verb == "get"
	return out, nil
}

func TestFilter(t *testing.T) {
	r := &fakeReviewer{}
	h, err := NewFilter(r)(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, auth string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, strings.TrimSpace(w.Body.String())
	}
	for _, c := range []struct {
		path, auth string
		code       int
		body       string
	}{
		{"/metrics", "", http.StatusUnauthorized, "needs a bearer token"},
		{"/metrics", "Basic cmVhZGVy", http.StatusUnauthorized, "needs a bearer token"},
		{"/metrics", "Bearer forged", http.StatusUnauthorized, "does not know this token"},
		{"/metrics", "Bearer other", http.StatusForbidden, `user "system:serviceaccount:monitoring:other" may not get /metrics`},
		{"/debug", "Bearer reader", http.StatusForbidden, "may not get /debug"},
		{"/metrics", "Bearer reader", http.StatusOK, "metrics"},
	} {
		if code, body := get(c.path, c.auth); code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("GET %s with %q: %d %q, want %d with %q", c.path, c.auth, code, body, c.code, c.body)
		}
	}

	// A verdict is kept: the same scrape again asks nothing, even with the API server down.
	before := r.reviews
	r.down = true
	if code, _ := get("/metrics", "Bearer reader"); code != http.StatusOK || r.reviews != before {
		t.Errorf("a second scrape: %d after %d more reviews, want 200 from the kept verdict", code, r.reviews-before)
	}
	// A token not seen yet cannot be checked: 503, and not kept.
	if code, body := get("/metrics", "Bearer new"); code != http.StatusServiceUnavailable || !strings.Contains(body, "connection refused") {
		t.Errorf("with the API server down: %d %q, want 503 naming the error", code, body)
	}
	r.down = false
	if code, _ := get("/metrics", "Bearer new"); code != http.StatusUnauthorized {
		t.Errorf("once the API server answers: %d, want 401 (the 503 was not kept)", code)
	}
}
