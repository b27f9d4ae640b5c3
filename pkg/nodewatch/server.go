package nodewatch

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Path is the watcher's one endpoint: GET Path?epoch=E&since=N&wait=D answers Changes.
const Path = "/v1/nodes"

// MaxWait bounds a request's wait.
const MaxWait = 30 * time.Second

// MaxInFlight bounds the requests a watcher serves at once: its readers are sunk's
// components, a few long polls per cluster, and more than this is a client gone wrong.
const MaxInFlight = 64

// An Authenticator says whether a request may read the table (JWTAuth).
type Authenticator interface {
	Check(r *http.Request) error
}

// Handler serves s to the requests auth lets in: the changes since the request's epoch and
// seq, waiting up to wait for one when there is none. An unreadable table answers 503 with the
// reason, never an empty change; a request without a valid token 401, before any work.
func Handler(s *Store, staleAfter time.Duration, auth Authenticator) http.Handler {
	slots := make(chan struct{}, MaxInFlight)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != Path || r.Method != http.MethodGet {
			http.Error(w, "GET "+Path+"?epoch=&since=&wait=", http.StatusNotFound)
			return
		}
		if err := auth.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			http.Error(w, fmt.Sprintf("more than %d requests at once", MaxInFlight), http.StatusTooManyRequests)
			return
		}
		q := r.URL.Query()
		var since uint64
		if v := q.Get("since"); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				http.Error(w, "since: "+err.Error(), http.StatusBadRequest)
				return
			}
			since = n
		}
		var wait time.Duration
		if v := q.Get("wait"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > MaxWait {
				http.Error(w, "wait: a duration from 0 to "+MaxWait.String(), http.StatusBadRequest)
				return
			}
			wait = d
		}
		epoch := q.Get("epoch")
		c, wake, err := s.Since(epoch, since, time.Now(), staleAfter)
		if err == nil && !c.Full && len(c.Nodes) == 0 && len(c.Deleted) == 0 && wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-wake:
			case <-t.C:
			case <-r.Context().Done():
			}
			t.Stop()
			c, _, err = s.Since(epoch, since, time.Now(), staleAfter)
		}
		if err != nil {
			http.Error(w, "the node table is unreadable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
	})
}
