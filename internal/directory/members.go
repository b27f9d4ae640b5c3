package directory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-ldap/ldap/v3"
)

// member is a user found in the directory, with the DN that rfc2307bis groups list them by.
type member struct {
	dn   string
	user User
}

// Members are the users of the POSIX group named group, sorted by name, with the groups each
// belongs to. A group that does not exist is an error wrapping ErrNoSuchGroup. A member whose
// user entry is missing or lacks uidNumber or gidNumber is left out and described in the
// returned warnings, for the caller to report, since one broken entry should not cost the rest
// of the group their pods. Any failure to read the directory is an error, never a shorter list.
func (c *Client) Members(ctx context.Context, group string) ([]User, []string, error) {
	if err := c.lock(ctx); err != nil {
		return nil, nil, err
	}
	defer c.unlock()
	users, warnings, err := c.members(ctx, group)
	if err != nil {
		return nil, nil, fmt.Errorf("directory: members of group %q: %w", group, err)
	}
	return users, warnings, nil
}

func (c *Client) members(ctx context.Context, group string) ([]User, []string, error) {
	a := c.attrs
	filter := fmt.Sprintf("(&(objectClass=%s)(%s=%s))", ldap.EscapeFilter(a.groupClass), a.groupName, ldap.EscapeFilter(group))
	res, err := c.search(ctx, c.cfg.GroupSearchBase, ldap.ScopeWholeSubtree, filter, []string{a.groupName, a.groupMember})
	if err != nil {
		return nil, nil, err
	}
	switch {
	case len(res.Entries) == 0 && len(res.Referrals) > 0:
		// The group may be where the server points, and saying it does not exist would
		// delete its members' pods.
		return nil, nil, fmt.Errorf("not under %s, which refers elsewhere (%s); referrals are not followed",
			c.cfg.GroupSearchBase, strings.Join(res.Referrals, ", "))
	case len(res.Entries) == 0:
		return nil, nil, fmt.Errorf("%w: no %s entry under %s", ErrNoSuchGroup, a.groupClass, c.cfg.GroupSearchBase)
	case len(res.Entries) > 1:
		return nil, nil, fmt.Errorf("ambiguous: %s and %s both have %s=%s", res.Entries[0].DN, res.Entries[1].DN, a.groupName, group)
	}
	var values []string
	seen := map[string]bool{}
	for _, v := range res.Entries[0].GetEqualFoldAttributeValues(a.groupMember) {
		if k := memberKey(v, a.memberIsDN); !seen[k] {
			seen[k] = true
			values = append(values, v)
		}
	}
	if len(values) > c.limit {
		return nil, nil, fmt.Errorf("it has %d members, more than the %d read", len(values), c.limit)
	}
	var found []member
	var warnings []string
	if a.memberIsDN {
		found, warnings, err = c.usersByDN(ctx, group, values)
	} else {
		found, warnings, err = c.usersByName(ctx, group, values)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := c.addGroups(ctx, found); err != nil {
		return nil, nil, err
	}
	users := make([]User, len(found))
	for i, m := range found {
		users[i] = m.user
	}
	slices.SortFunc(users, func(x, y User) int { return strings.Compare(x.Name, y.Name) })
	return users, warnings, nil
}

// userAttrs are the attributes a user entry is read with.
func (a attrMap) userAttrs() []string {
	return slices.DeleteFunc([]string{a.userName, a.uidNumber, a.gidNumber, a.home, a.shell, a.sshKey},
		func(s string) bool { return s == "" })
}

// usersByName looks up rfc2307 members, which groups list by user name.
func (c *Client) usersByName(ctx context.Context, group string, names []string) ([]member, []string, error) {
	a := c.attrs
	var found []member
	var warnings []string
	for batch := range slices.Chunk(names, batchSize) {
		var terms strings.Builder
		for _, n := range batch {
			fmt.Fprintf(&terms, "(%s=%s)", a.userName, ldap.EscapeFilter(n))
		}
		filter := fmt.Sprintf("(&(objectClass=%s)(|%s))", ldap.EscapeFilter(a.userClass), terms.String())
		res, err := c.search(ctx, c.cfg.UserSearchBase, ldap.ScopeWholeSubtree, filter, a.userAttrs())
		if err != nil {
			return nil, nil, err
		}
		for _, n := range batch {
			var entries []*ldap.Entry
			var name string
			for _, e := range res.Entries {
				for _, v := range e.GetEqualFoldAttributeValues(a.userName) {
					if strings.EqualFold(v, n) {
						entries, name = append(entries, e), v
						break
					}
				}
			}
			switch {
			case len(entries) == 0 && len(res.Referrals) > 0:
				return nil, nil, fmt.Errorf("member %q is not under %s, which refers elsewhere (%s); referrals are not followed",
					n, c.cfg.UserSearchBase, strings.Join(res.Referrals, ", "))
			case len(entries) == 0:
				warnings = append(warnings, fmt.Sprintf("member %q of group %q has no %s entry under %s", n, group, a.userClass, c.cfg.UserSearchBase))
			case len(entries) > 1:
				warnings = append(warnings, fmt.Sprintf("member %q of group %q is ambiguous: %s and %s both have %s=%s",
					n, group, entries[0].DN, entries[1].DN, a.userName, n))
			default:
				if u, warning := a.user(entries[0], name); warning != "" {
					warnings = append(warnings, fmt.Sprintf("member %q of group %q: %s", n, group, warning))
				} else {
					found = append(found, member{dn: entries[0].DN, user: u})
				}
			}
		}
	}
	return found, warnings, nil
}

// usersByDN looks up the members of rfc2307bis, IPA and AD groups, which groups list by DN.
// Like SSSD, it ignores DNs outside the user search base, and it does not expand nested groups.
func (c *Client) usersByDN(ctx context.Context, group string, dns []string) ([]member, []string, error) {
	a := c.attrs
	base, err := ldap.ParseDN(c.cfg.UserSearchBase)
	if err != nil {
		return nil, nil, fmt.Errorf("user search base %q: %w", c.cfg.UserSearchBase, err)
	}
	var found []member
	var warnings []string
	warn := func(dn, format string, args ...any) {
		warnings = append(warnings, fmt.Sprintf("member %s of group %q ", dn, group)+fmt.Sprintf(format, args...))
	}
	names := map[string]string{}
	for _, dn := range dns {
		parsed, err := ldap.ParseDN(dn)
		if err != nil {
			warn(dn, "is not a valid DN: %v", err)
			continue
		}
		if !base.AncestorOfFold(parsed) {
			warn(dn, "is outside the user search base %s", c.cfg.UserSearchBase)
			continue
		}
		filter := fmt.Sprintf("(objectClass=%s)", ldap.EscapeFilter(a.userClass))
		res, err := c.search(ctx, dn, ldap.ScopeBaseObject, filter, a.userAttrs())
		if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
			warn(dn, "has no entry")
			continue
		} else if err != nil {
			return nil, nil, err
		}
		if len(res.Entries) != 1 {
			warn(dn, "is not a %s entry (nested groups are not expanded)", a.userClass)
			continue
		}
		e := res.Entries[0]
		u, warning := a.user(e, rdnName(parsed, a.userName, e.GetEqualFoldAttributeValues(a.userName)))
		if warning != "" {
			warn(dn, "%s", warning)
			continue
		}
		if other, ok := names[strings.ToLower(u.Name)]; ok {
			warn(dn, "has the same name %q as %s; both are left out", u.Name, other)
			found = slices.DeleteFunc(found, func(m member) bool { return strings.EqualFold(m.user.Name, u.Name) })
			continue
		}
		names[strings.ToLower(u.Name)] = dn
		found = append(found, member{dn: e.DN, user: u})
	}
	return found, warnings, nil
}

// rdnName picks, of a user's names, the one their DN is named by, as a multi-valued name
// attribute otherwise leaves the user's name to the server's value order.
func rdnName(dn *ldap.DN, attr string, names []string) string {
	if len(dn.RDNs) > 0 {
		for _, atv := range dn.RDNs[0].Attributes {
			for _, n := range names {
				if strings.EqualFold(atv.Type, attr) && strings.EqualFold(atv.Value, n) {
					return n
				}
			}
		}
	}
	if len(names) > 0 {
		return names[0]
	}
	return ""
}

// user reads a user entry named name, or says why it cannot make a login pod's user of it.
func (a attrMap) user(e *ldap.Entry, name string) (User, string) {
	if name == "" {
		return User{}, fmt.Sprintf("%s has no %s", e.DN, a.userName)
	}
	u := User{Name: name, Shell: DefaultShell}
	for _, f := range []struct {
		attr string
		n    *int64
	}{{a.uidNumber, &u.UID}, {a.gidNumber, &u.GID}} {
		v := e.GetEqualFoldAttributeValue(f.attr)
		if v == "" {
			return User{}, fmt.Sprintf("%s has no %s", e.DN, f.attr)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return User{}, fmt.Sprintf("%s has %s %q, not a number", e.DN, f.attr, v)
		}
		*f.n = n
	}
	if a.home != "" {
		u.Home = e.GetEqualFoldAttributeValue(a.home)
	}
	if s := e.GetEqualFoldAttributeValue(a.shell); a.shell != "" && s != "" {
		u.Shell = s
	}
	if keys := e.GetEqualFoldAttributeValues(a.sshKey); a.sshKey != "" && len(keys) > 0 {
		u.SSHKeys = slices.Clone(keys)
	}
	return u, ""
}

// addGroups fills in the groups of found: every POSIX group that lists them, and the one of
// their gidNumber, which SSSD counts as a member without it being listed. Groups without a
// numeric gidNumber are left out without a warning: they are common in AD, where they are not
// POSIX groups at all, and no process can run with them.
func (c *Client) addGroups(ctx context.Context, found []member) error {
	a := c.attrs
	entries := map[string]*ldap.Entry{}
	for batch := range slices.Chunk(found, batchSize) {
		var terms strings.Builder
		gids := map[int64]bool{}
		for _, m := range batch {
			v := m.user.Name
			if a.memberIsDN {
				v = m.dn
			}
			fmt.Fprintf(&terms, "(%s=%s)", a.groupMember, ldap.EscapeFilter(v))
			if !gids[m.user.GID] {
				gids[m.user.GID] = true
				fmt.Fprintf(&terms, "(%s=%d)", a.groupGID, m.user.GID)
			}
		}
		filter := fmt.Sprintf("(&(objectClass=%s)(|%s))", ldap.EscapeFilter(a.groupClass), terms.String())
		res, err := c.search(ctx, c.cfg.GroupSearchBase, ldap.ScopeWholeSubtree, filter, []string{a.groupName, a.groupGID, a.groupMember})
		if err != nil {
			return err
		}
		for _, e := range res.Entries {
			entries[strings.ToLower(e.DN)] = e
		}
	}

	byMember := map[string][]Group{} // by lower-cased user name or normalized DN
	byGID := map[int64][]Group{}
	for _, e := range entries {
		name := e.GetEqualFoldAttributeValue(a.groupName)
		gid, err := strconv.ParseInt(e.GetEqualFoldAttributeValue(a.groupGID), 10, 64)
		if name == "" || err != nil {
			continue
		}
		g := Group{Name: name, GID: gid}
		byGID[gid] = append(byGID[gid], g)
		for _, v := range e.GetEqualFoldAttributeValues(a.groupMember) {
			k := memberKey(v, a.memberIsDN)
			byMember[k] = append(byMember[k], g)
		}
	}
	for i := range found {
		u := &found[i].user
		key := memberKey(u.Name, false)
		if a.memberIsDN {
			key = memberKey(found[i].dn, true)
		}
		groups := append(slices.Clone(byMember[key]), byGID[u.GID]...)
		slices.SortFunc(groups, func(x, y Group) int {
			return cmp.Or(strings.Compare(x.Name, y.Name), cmp.Compare(x.GID, y.GID))
		})
		u.Groups = slices.Compact(groups)
	}
	return nil
}

// memberKey is how a member value compares: names without case, like the uid attribute, and DNs
// by their parsed form, as servers write the same DN with different spacing and case.
func memberKey(v string, isDN bool) string {
	if isDN {
		if dn, err := ldap.ParseDN(v); err == nil {
			v = dn.String()
		}
	}
	return strings.ToLower(v)
}

// cutFold is strings.Cut with sep matched regardless of case.
func cutFold(s, sep string) (before, after string, found bool) {
	if i := strings.Index(strings.ToLower(s), strings.ToLower(sep)); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}
