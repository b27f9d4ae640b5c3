package slurm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// Helpers shared by the version adapters.

// alloc makes *p non-nil and returns it. The v0.0.41 types are anonymous structs, which cannot
// be named to allocate them; type inference can.
func alloc[T any](p **T) *T {
	if *p == nil {
		*p = new(T)
	}
	return *p
}

// pick returns the first non-nil of the generated response's JSON200 and JSONDefault.
func pick[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func strs(p *[]string) []string {
	if p == nil {
		return nil
	}
	return *p
}

func num[T ~int32 | ~int64 | ~int](p *T) int {
	if p == nil {
		return 0
	}
	return int(*p)
}

func boolean(p *bool) bool { return p != nil && *p }

func ptr[T any](v T) *T { return &v }

func stringsOf[T ~string](p *[]T) []string {
	if p == nil {
		return nil
	}
	out := make([]string, len(*p))
	for i, s := range *p {
		out[i] = string(s)
	}
	return out
}

// noValStruct is Slurm's {set, infinite, number} struct as the generated clients declare it:
// inline in v0.0.41, named per integer width (V0042Uint32NoValStruct, ...) later, always of
// this shape. Go cannot read a type parameter's fields, but it can convert it to this struct.
type noValStruct[N int32 | int64] interface{ ~noValFields[N] }

type noValFields[N int32 | int64] = struct {
	Infinite *bool `json:"infinite,omitempty"`
	Number   *N    `json:"number,omitempty"`
	Set      *bool `json:"set,omitempty"`
}

// noValue reads a {set, infinite, number} struct: ok is false when absent, unset or infinite.
func noValue[N int32 | int64, S noValStruct[N]](p *S) (int64, bool) {
	if p == nil {
		return 0, false
	}
	v := noValFields[N](*p)
	if v.Set == nil || !*v.Set || (v.Infinite != nil && *v.Infinite) || v.Number == nil {
		return 0, false
	}
	return int64(*v.Number), true
}

// setNoValue sets *dst to a {set, infinite, number} struct holding v.
func setNoValue[N int32 | int64, S noValStruct[N]](dst **S, v N) {
	s := S(noValFields[N]{Set: ptr(true), Number: &v})
	*dst = &s
}

// setList sets *dst to the one-element list {v} (a state or flag list of any generated type).
func setList[S ~[]E, E ~string](dst **S, v string) {
	s := S{E(v)}
	*dst = &s
}

// errorStruct is one entry of a generated answer's `errors` array, in every version.
type errorStruct interface{ ~errorFields }

type errorFields = struct {
	Description *string `json:"description,omitempty"`
	Error       *string `json:"error,omitempty"`
	ErrorNumber *int32  `json:"error_number,omitempty"`
	Source      *string `json:"source,omitempty"`
}

// details converts an answer's `errors` array.
func details[E errorStruct](e *[]E) []ErrorDetail {
	if e == nil || len(*e) == 0 {
		return nil
	}
	out := make([]ErrorDetail, len(*e))
	for i, d := range *e {
		f := errorFields(d)
		out[i] = ErrorDetail{Code: num(f.ErrorNumber), Error: str(f.Error), Description: str(f.Description), Source: str(f.Source)}
	}
	return out
}

func unixTime(v int64, ok bool) time.Time {
	if !ok || v <= 0 {
		return time.Time{}
	}
	return time.Unix(v, 0)
}

func minutes(v int64, ok bool) time.Duration {
	if !ok {
		return 0
	}
	return time.Duration(v) * time.Minute
}

// ceilMinutes rounds a positive duration up to whole minutes, Slurm's time limit unit.
func ceilMinutes(d time.Duration) int64 {
	m := int64(math.Ceil(d.Minutes()))
	if m < 1 {
		m = 1
	}
	return m
}

func gresTRES(g string) string {
	if g == "" || strings.HasPrefix(g, "gres/") || strings.Contains(g, ",") {
		return g
	}
	return "gres/" + g
}

func defaultEnv(env []string) []string {
	if len(env) == 0 {
		return []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	}
	return env
}

// noJSON is the decode failure of a 2xx answer that carried no JSON body.
type noJSON struct{ contentType string }

func (e noJSON) Error() string {
	return "answer is not JSON (Content-Type " + e.contentType + ")"
}

// bodyless decides about an answer with no decoded JSON: a 2xx without JSON is a decode error,
// anything else is classified by its status.
func bodyless(resp *http.Response) (answer, error) {
	a := answer{status: resp.StatusCode}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return a, noJSON{resp.Header.Get("Content-Type")}
	}
	return a, nil
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// only returns the record of a lookup's answer that match accepts, or ErrNotFound saying
// "answer has N <records>, none <which>".
func only[T any](l []T, endpoint, records, which string, match func(*T) bool) (*T, error) {
	for i := range l {
		if match(&l[i]) {
			return &l[i], nil
		}
	}
	return nil, &SlurmError{Endpoint: endpoint, HTTPStatus: http.StatusOK, Kind: ErrNotFound,
		Description: fmt.Sprintf("answer has %d %s, none %s", len(l), records, which)}
}

// unsupported reports an operation the API version has no endpoint for.
func (c *core) unsupported(endpoint, what string) error {
	err := fmt.Errorf("slurm %s: %w: slurmrestd 24.11 has no %s endpoint (v0.0.41, v0.0.42)", endpoint, ErrUnsupported, what)
	c.cfg.Metrics.observe(c.cfg.Cluster, endpoint, OutcomeUnsupported, 0)
	return err
}

// nodeFlags are the show flags of node queries: slurmrestd's defaults (ALL, DETAIL, MIXED) plus
// FUTURE, without which nodes in state FUTURE (e.g. created by `scontrol create nodename=...
// state=future`) are missing from lists and a lookup by name reports them as unknown. Passing
// any flag replaces the defaults, hence the full set. slurmrestd 24.11 takes a list as a
// repeated parameter (flags=A&flags=B); a comma, raw or escaped, is refused.
var nodeFlags = []string{"ALL", "DETAIL", "MIXED", "FUTURE"}

// isPartitionsNoChange recognises a Slurm 24.11 bug: GET /nodes/?update_time=T loads the nodes
// and then the partitions with the same update_time; when nodes changed since T but partitions
// did not, the partition load answers "no change" and slurmrestd fails the whole request with
// HTTP 500, error -1 "Unable to query partitions" (source _dump_nodes). It means "nodes
// changed", and the caller lists again without update_time.
func isPartitionsNoChange(err error) bool {
	var se *SlurmError
	return errors.As(err, &se) && len(se.Errors) == 1 && se.Code == -1 &&
		se.Description == "Unable to query partitions" && se.Source == "_dump_nodes"
}

// unchangedList tells slurmrestd's "nothing changed" answer to an incremental list from a list.
// Slurm answers GET /nodes?update_time=T with 304 when nothing changed, but GET /jobs with 200,
// an empty list, last_update 0 and the warning "No job changes since update_time" (24.11
// jobs.c op_handler_jobs turns SLURM_NO_CHANGE_IN_DATA into a warning). A real list always
// carries slurmctld's last_update, so an empty list without one means "no change" when asked
// incrementally and is a malformed answer otherwise; it never means "every record is gone".
func unchangedList(since time.Time, records int, last time.Time) (bool, error) {
	if records > 0 || !last.IsZero() {
		return false, nil
	}
	if since.IsZero() {
		return false, fmt.Errorf("%w: a full list without last_update", ErrDecode)
	}
	return true, nil
}

// rawQuery adds key=value for each value to a request's query: the generated clients model
// list-valued parameters (flags) as a single enum value.
func rawQuery(key string, values []string) func(context.Context, *http.Request) error {
	return func(_ context.Context, req *http.Request) error {
		q := req.URL.Query()
		for _, v := range values {
			q.Add(key, v)
		}
		req.URL.RawQuery = q.Encode()
		return nil
	}
}
