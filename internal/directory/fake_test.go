package directory

import (
	"fmt"
	"strings"
	"time"

	ber "github.com/go-asn1-ber/asn1-ber"
	"github.com/go-ldap/ldap/v3"
)

// fakeDir answers searches over its entries the way slapd would: it evaluates the filter sent
// (compiled by go-ldap, as on the wire), honours base, scope, size limit and the attributes
// asked for, and says noSuchObject for a base that is not in the tree. Filters it does not
// understand are errors, so that a test fails rather than matching by accident.
type fakeDir struct {
	entries   []*ldap.Entry
	referrals []string
	// fail, when set, can fail a search before it runs.
	fail     func(*ldap.SearchRequest) error
	requests []*ldap.SearchRequest
	timeouts []time.Duration
	closed   bool
}

func (f *fakeDir) SetTimeout(d time.Duration) { f.timeouts = append(f.timeouts, d) }

func (f *fakeDir) Close() error {
	f.closed = true
	return nil
}

func (f *fakeDir) Search(req *ldap.SearchRequest) (*ldap.SearchResult, error) {
	f.requests = append(f.requests, req)
	if f.fail != nil {
		if err := f.fail(req); err != nil {
			return nil, err
		}
	}
	filter, err := ldap.CompileFilter(req.Filter)
	if err != nil {
		return nil, ldap.NewError(ldap.LDAPResultFilterError, err)
	}
	base, err := ldap.ParseDN(req.BaseDN)
	if err != nil {
		return nil, ldap.NewError(ldap.LDAPResultInvalidDNSyntax, err)
	}
	res := &ldap.SearchResult{Referrals: f.referrals}
	baseExists := false
	for _, e := range f.entries {
		dn, err := ldap.ParseDN(e.DN)
		if err != nil {
			return nil, err
		}
		self := dn.EqualFold(base)
		baseExists = baseExists || self || base.AncestorOfFold(dn)
		switch req.Scope {
		case ldap.ScopeBaseObject:
			if !self {
				continue
			}
		case ldap.ScopeWholeSubtree:
			if !self && !base.AncestorOfFold(dn) {
				continue
			}
		default:
			return nil, ldap.NewError(ldap.LDAPResultUnwillingToPerform, fmt.Errorf("fake: scope %d", req.Scope))
		}
		ok, err := matches(filter, e)
		if err != nil {
			return nil, ldap.NewError(ldap.LDAPResultUnwillingToPerform, err)
		}
		if !ok {
			continue
		}
		if req.SizeLimit > 0 && len(res.Entries) == req.SizeLimit {
			// slapd sends the entries up to the limit, then the error.
			return res, ldap.NewError(ldap.LDAPResultSizeLimitExceeded, fmt.Errorf("size limit exceeded"))
		}
		res.Entries = append(res.Entries, project(e, req.Attributes))
	}
	if !baseExists {
		return nil, ldap.NewError(ldap.LDAPResultNoSuchObject, fmt.Errorf("no such object %s", req.BaseDN))
	}
	return res, nil
}

func matches(p *ber.Packet, e *ldap.Entry) (bool, error) {
	switch p.Tag {
	case ldap.FilterAnd, ldap.FilterOr:
		for _, c := range p.Children {
			ok, err := matches(c, e)
			if err != nil {
				return false, err
			}
			if ok == (p.Tag == ldap.FilterOr) {
				return ok, nil
			}
		}
		return p.Tag == ldap.FilterAnd, nil
	case ldap.FilterNot:
		ok, err := matches(p.Children[0], e)
		return !ok, err
	case ldap.FilterPresent:
		return len(values(e, ber.DecodeString(p.Data.Bytes()))) > 0, nil
	case ldap.FilterEqualityMatch:
		attr := ber.DecodeString(p.Children[0].Data.Bytes())
		want := ber.DecodeString(p.Children[1].Data.Bytes())
		for _, v := range values(e, attr) {
			if equal(attr, v, want) {
				return true, nil
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("fake: unsupported filter %s", ldap.FilterMap[uint64(p.Tag)])
}

// equal compares by the attribute's matching rule in OpenLDAP's schema.
func equal(attr, a, b string) bool {
	switch strings.ToLower(attr) {
	case "memberuid": // caseExactIA5Match
		return a == b
	case "member":
		x, err1 := ldap.ParseDN(a)
		y, err2 := ldap.ParseDN(b)
		return err1 == nil && err2 == nil && x.EqualFold(y)
	}
	return strings.EqualFold(a, b)
}

// values are an entry's values of attr, including those sent under an option like ";range=".
func values(e *ldap.Entry, attr string) []string {
	var vs []string
	for _, a := range e.Attributes {
		if name, _, _ := strings.Cut(a.Name, ";"); strings.EqualFold(name, attr) {
			vs = append(vs, a.Values...)
		}
	}
	return vs
}

func project(e *ldap.Entry, attrs []string) *ldap.Entry {
	if len(attrs) == 0 {
		return e
	}
	out := &ldap.Entry{DN: e.DN}
	for _, a := range e.Attributes {
		name, _, _ := strings.Cut(a.Name, ";")
		for _, want := range attrs {
			if strings.EqualFold(name, want) {
				out.Attributes = append(out.Attributes, a)
				break
			}
		}
	}
	return out
}

// entry builds an entry from attribute, value pairs; an attribute given twice is multi-valued.
func entry(dn string, kv ...string) *ldap.Entry {
	e := &ldap.Entry{DN: dn}
next:
	for i := 0; i < len(kv); i += 2 {
		for _, a := range e.Attributes {
			if a.Name == kv[i] {
				a.Values = append(a.Values, kv[i+1])
				continue next
			}
		}
		e.Attributes = append(e.Attributes, &ldap.EntryAttribute{Name: kv[i], Values: []string{kv[i+1]}})
	}
	return e
}
