package slurm

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Sentinel errors. Every error the client returns matches at most one of them with errors.Is;
// an error that matches none is a Slurm refusal (*SlurmError) the caller should not retry as is.
var (
	// ErrNotFound: the node, job, partition or reservation does not exist.
	ErrNotFound = errors.New("slurm: not found")
	// ErrUnauthorized: slurmrestd or slurmctld rejected the credentials (401, 403, 511,
	// authentication and access-denied error numbers).
	ErrUnauthorized = errors.New("slurm: unauthorized")
	// ErrUnavailable: slurmrestd or slurmctld could not be reached or answered 5xx without a
	// Slurm error; retrying later may help.
	ErrUnavailable = errors.New("slurm: unavailable")
	// ErrDecode: the answer could not be decoded (malformed or truncated JSON, wrong content).
	ErrDecode = errors.New("slurm: malformed response")
	// ErrUnsupported: the operation has no endpoint in the API version the client speaks.
	ErrUnsupported = errors.New("slurm: not supported by this REST API version")
	// ErrVersionNotServed: slurmrestd does not serve the client's API version any more (or
	// yet): an upgraded Slurm dropped it. It answers 404 in plain text ("Unable to find
	// requested URL endpoint. Please query the '/openapi/v3' endpoint ..." in 26.05, "Unable
	// find requested URL. Please view /openapi/v3 ..." in 24.11), never a Slurm answer; the
	// request did nothing. Discovering rediscovers on it.
	ErrVersionNotServed = errors.New("slurm: API version not served by slurmrestd")
)

// ErrorDetail is one entry of the `errors` array of a slurmrestd answer.
type ErrorDetail struct {
	Code        int    // error_number (Slurm errno; 0 when Slurm had no number to give)
	Error       string // short text of the errno
	Description string // what slurmrestd was doing
	Source      string // function that reported it
}

// SlurmError is an answer from slurmrestd that reports failure: a non-2xx status or a non-empty
// `errors` array (slurmrestd often says 200 and lists errors). Kind is ErrNotFound,
// ErrUnauthorized, ErrUnavailable or nil, and errors.Is sees it.
type SlurmError struct {
	Endpoint    string
	HTTPStatus  int
	Code        int // error_number of the first error
	Description string
	Source      string
	Errors      []ErrorDetail
	Kind        error
}

func (e *SlurmError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "slurm %s: HTTP %d", e.Endpoint, e.HTTPStatus)
	if e.Kind != nil {
		fmt.Fprintf(&b, " (%s)", strings.TrimPrefix(e.Kind.Error(), "slurm: "))
	}
	for i, d := range e.Errors {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Errors)-i)
			break
		}
		fmt.Fprintf(&b, "; error %d %q: %s [%s]", d.Code, d.Error, d.Description, d.Source)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrNotFound) and friends work.
func (e *SlurmError) Is(target error) bool { return e.Kind != nil && target == e.Kind }

// Slurm error numbers (slurm_errno.h) that classify an error.
const (
	errnoProtocolAuth     = 1007 // SLURM_PROTOCOL_AUTHENTICATION_ERROR
	errnoCommConnection   = 1001 // SLURM_COMMUNICATIONS_CONNECTION_ERROR .. 1005
	errnoCommLast         = 1005
	errnoCtldCommFirst    = 1800 // SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR .. 1803
	errnoCtldCommLast     = 1803
	errnoInvalidPartition = 2000 // ESLURM_INVALID_PARTITION_NAME
	errnoAccessDenied     = 2002 // ESLURM_ACCESS_DENIED
	errnoNotTopPriority   = 2013 // ESLURM_NOT_TOP_PRIORITY
	errnoNodeConfig       = 2014 // ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE
	errnoPartConfig       = 2015 // ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE
	errnoNodesBusy        = 2016 // ESLURM_NODES_BUSY
	errnoInvalidJobID     = 2017 // ESLURM_INVALID_JOB_ID
	errnoInvalidNodeName  = 2018 // ESLURM_INVALID_NODE_NAME
	errnoAlreadyDone      = 2021 // ESLURM_ALREADY_DONE
	errnoUserIDMissing    = 2010 // ESLURM_USER_ID_MISSING
)

// NotNow reports an immediate allocation (Client.AllocateJob) that Slurm refused for the moment:
// the resources it needs are in use (ESLURM_NODES_BUSY), or a job of higher priority waits in
// the partition (ESLURM_NOT_TOP_PRIORITY). Either may change within a second.
func NotNow(err error) bool {
	var se *SlurmError
	return errors.As(err, &se) && se.Kind == nil && hasCode(se.Errors, errnoNodesBusy, errnoNotTopPriority)
}

// Busy reports a NotNow refusal for busy resources alone (ESLURM_NODES_BUSY): no job of higher
// priority waits for them, so the request may start as soon as resources are freed.
func Busy(err error) bool {
	var se *SlurmError
	return errors.As(err, &se) && se.Kind == nil && hasCode(se.Errors, errnoNodesBusy) && !hasCode(se.Errors, errnoNotTopPriority)
}

// Unsatisfiable reports a refusal of a job request itself, which no wait changes: no node
// configuration or partition can satisfy it, the partition does not exist, or the user may not
// use it. Slurm answers a batch submission of the same request the same way.
func Unsatisfiable(err error) bool {
	var se *SlurmError
	return errors.As(err, &se) && se.Kind == nil && hasCode(se.Errors, errnoNodeConfig, errnoPartConfig, errnoInvalidPartition, errnoAccessDenied)
}

// NotDelivered reports a request slurmrestd could not pass on to slurmctld: it found no
// slurmctld to connect to, after trying for MessageTimeout (SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR,
// which Slurm's controller client makes of SLURM_COMMUNICATIONS_CONNECTION_ERROR; an address
// slurmrestd cannot resolve ends the same way, src/common/slurm_protocol_api.c). slurmctld never
// saw the request, so it was not carried out. A send or receive error is not this: the request
// may have arrived.
func NotDelivered(err error) bool {
	var se *SlurmError
	return errors.As(err, &se) && hasCode(se.Errors, errnoCommConnection, errnoCtldCommFirst)
}

// keyRefused reports an error that says the credential itself was refused (not that the user
// may not do something): HTTP 401 or 511, or SLURM_PROTOCOL_AUTHENTICATION_ERROR, which is what
// slurmrestd 24.11 answers for a JWT signed with a key slurmctld did not load.
func keyRefused(err error) bool {
	var se *SlurmError
	if !errors.As(err, &se) {
		return false
	}
	return se.HTTPStatus == http.StatusUnauthorized || se.HTTPStatus == http.StatusNetworkAuthenticationRequired ||
		hasCode(se.Errors, errnoProtocolAuth)
}

// classify turns one answer into the error the caller sees, or nil for success. It is the single
// place where "fail closed" is decided:
//   - a decode failure is never success;
//   - any entry in `errors` is never success, whatever the status;
//   - only a 2xx (or 304 where the caller asked for it) without errors is success.
//
// missing reports whether the operation looked something up by name and got no record back:
// slurmrestd 24.11 answers an unknown node with 200, error_number 0 and no nodes, which is the
// only way to tell "no such node" apart; only an entry with error_number 0 (Slurm loaded the
// table fine and did not find the name) or an invalid-name errno makes it ErrNotFound.
func classify(endpoint string, status int, errs []ErrorDetail, decodeErr error, missing bool) error {
	se := &SlurmError{Endpoint: endpoint, HTTPStatus: status, Errors: errs}
	if len(errs) > 0 {
		se.Code, se.Description, se.Source = errs[0].Code, errs[0].Description, errs[0].Source
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNetworkAuthenticationRequired:
		se.Kind = ErrUnauthorized
		return se
	case hasCode(errs, errnoProtocolAuth, errnoAccessDenied, errnoUserIDMissing):
		se.Kind = ErrUnauthorized
		return se
	case decodeErr != nil:
		if status >= 500 {
			return fmt.Errorf("slurm %s: HTTP %d: %w: %w (%w)", endpoint, status, ErrUnavailable, ErrDecode, decodeErr)
		}
		return fmt.Errorf("slurm %s: HTTP %d: %w: %w", endpoint, status, ErrDecode, decodeErr)
	case hasCode(errs, errnoInvalidJobID, errnoInvalidNodeName, errnoInvalidPartition):
		se.Kind = ErrNotFound
		return se
	case status == http.StatusNotFound:
		se.Kind = ErrNotFound
		return se
	case missing && len(errs) > 0 && allCode(errs, 0):
		se.Kind = ErrNotFound
		return se
	case hasCodeIn(errs, errnoCommConnection, errnoCommLast) || hasCodeIn(errs, errnoCtldCommFirst, errnoCtldCommLast):
		se.Kind = ErrUnavailable
		return se
	case status >= 500 && len(errs) == 0:
		se.Kind = ErrUnavailable
		return se
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		se.Kind = ErrUnavailable
		return se
	case len(errs) > 0:
		return se
	case status < 200 || status > 299:
		return se
	case missing:
		// 2xx, no errors, and still no record: never read that as "exists".
		se.Kind = ErrNotFound
		return se
	}
	return nil
}

func hasCode(errs []ErrorDetail, codes ...int) bool {
	for _, e := range errs {
		for _, c := range codes {
			if e.Code == c {
				return true
			}
		}
	}
	return false
}

func hasCodeIn(errs []ErrorDetail, lo, hi int) bool {
	for _, e := range errs {
		if e.Code >= lo && e.Code <= hi {
			return true
		}
	}
	return false
}

func allCode(errs []ErrorDetail, code int) bool {
	for _, e := range errs {
		if e.Code != code {
			return false
		}
	}
	return true
}
