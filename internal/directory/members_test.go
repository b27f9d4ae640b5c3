package directory

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"
)

const base = "dc=example,dc=org"

func userDN(uid string) string { return "uid=" + uid + ",ou=people," + base }
func groupDN(cn string) string { return "cn=" + cn + ",ou=groups," + base }

// posixUser is a user entry as the chart's directory holds them, with its personal group.
func posixUser(name string, id int, kv ...string) []*ldap.Entry {
	n := fmt.Sprint(id)
	attrs := append([]string{"objectClass", "posixAccount", "objectClass", "ldapPublicKey",
		"uid", name, "uidNumber", n, "gidNumber", n, "homeDirectory", "/home/" + name}, kv...)
	return []*ldap.Entry{
		entry(userDN(name), attrs...),
		entry(groupDN(name), "objectClass", "posixGroup", "cn", name, "gidNumber", n),
	}
}

// rfc2307Dir is a directory like the chart's: research lists alice and bob, gpu lists alice,
// broken lists a user without an entry and one without uidNumber, and dave is in none of them.
func rfc2307Dir() *fakeDir {
	f := &fakeDir{entries: []*ldap.Entry{
		entry(base, "objectClass", "dcObject"),
		entry("ou=people,"+base, "objectClass", "organizationalUnit"),
		entry("ou=groups,"+base, "objectClass", "organizationalUnit"),
		entry(userDN("carol"), "objectClass", "posixAccount", "uid", "carol", "gidNumber", "1003"),
		entry(groupDN("research"), "objectClass", "posixGroup", "cn", "research", "gidNumber", "2000",
			"memberUid", "alice", "memberUid", "bob"),
		entry(groupDN("gpu"), "objectClass", "posixGroup", "cn", "gpu", "gidNumber", "3000", "memberUid", "alice"),
		entry(groupDN("broken"), "objectClass", "posixGroup", "cn", "broken", "gidNumber", "2500",
			"memberUid", "alice", "memberUid", "ghost", "memberUid", "carol"),
		entry(groupDN("other"), "objectClass", "posixGroup", "cn", "other", "gidNumber", "4000", "memberUid", "dave"),
	}}
	f.entries = append(f.entries, posixUser("alice", 1001, "loginShell", "/bin/zsh",
		"sshPublicKey", "ssh-ed25519 AAAA1 alice@a", "sshPublicKey", "ssh-rsa AAAA2 alice@b")...)
	f.entries = append(f.entries, posixUser("bob", 1002)...)
	f.entries = append(f.entries, posixUser("dave", 1004)...)
	return f
}

func testClient(t *testing.T, cfg Config, f *fakeDir) *Client {
	t.Helper()
	if cfg.SearchBase == "" {
		cfg.SearchBase = base
	}
	a, err := cfg.attrs()
	if err != nil {
		t.Fatal(err)
	}
	return newClient(cfg, a, f)
}

var (
	alice = User{Name: "alice", UID: 1001, GID: 1001, Home: "/home/alice", Shell: "/bin/zsh",
		SSHKeys: []string{"ssh-ed25519 AAAA1 alice@a", "ssh-rsa AAAA2 alice@b"},
		Groups:  []Group{{"alice", 1001}, {"broken", 2500}, {"gpu", 3000}, {"research", 2000}}}
	bob = User{Name: "bob", UID: 1002, GID: 1002, Home: "/home/bob", Shell: DefaultShell,
		Groups: []Group{{"bob", 1002}, {"research", 2000}}}
)

func checkUsers(t *testing.T, got, want []User) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("users:\n got %+v\nwant %+v", got, want)
	}
}

func TestMembersRFC2307(t *testing.T) {
	f := rfc2307Dir()
	users, warnings, err := testClient(t, Config{}, f).Members(context.Background(), "research")
	if err != nil {
		t.Fatal(err)
	}
	checkUsers(t, users, []User{alice, bob})
	if len(warnings) != 0 {
		t.Errorf("warnings: %q", warnings)
	}
	for _, req := range f.requests {
		if req.SizeLimit != maxEntries || !req.EnforceSizeLimit {
			t.Errorf("search %s: size limit %d (enforced %v), want %d", req.Filter, req.SizeLimit, req.EnforceSizeLimit, maxEntries)
		}
	}
}

func TestMembersSkipsBrokenMembersWithWarnings(t *testing.T) {
	users, warnings, err := testClient(t, Config{}, rfc2307Dir()).Members(context.Background(), "broken")
	if err != nil {
		t.Fatal(err)
	}
	checkUsers(t, users, []User{alice})
	if len(warnings) != 2 || !strings.Contains(warnings[0], `"ghost"`) || !strings.Contains(warnings[0], "no posixAccount entry") ||
		!strings.Contains(warnings[1], `"carol"`) || !strings.Contains(warnings[1], "no uidNumber") {
		t.Errorf("warnings: %q, want ghost without an entry and carol without uidNumber", warnings)
	}
}

func TestMembersNoSuchGroup(t *testing.T) {
	// "*" would match every group if it reached the filter unescaped.
	for _, name := range []string{"nonesuch", "*"} {
		users, _, err := testClient(t, Config{}, rfc2307Dir()).Members(context.Background(), name)
		if !errors.Is(err, ErrNoSuchGroup) || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) || users != nil {
			t.Errorf("Members(%q) = %v, %v; want ErrNoSuchGroup naming the group", name, users, err)
		}
	}
}

func TestMembersReferralIsNotNoSuchGroup(t *testing.T) {
	f := rfc2307Dir()
	f.referrals = []string{"ldap://other.example.org/dc=example,dc=org"}
	_, _, err := testClient(t, Config{}, f).Members(context.Background(), "nonesuch")
	if err == nil || errors.Is(err, ErrNoSuchGroup) || !strings.Contains(err.Error(), "ldap://other.example.org") {
		t.Errorf("err = %v, want an error naming the referral, not ErrNoSuchGroup", err)
	}
}

func TestMembersSearchErrors(t *testing.T) {
	for _, tc := range []struct {
		name, schema, filterPart string
		dir                      func() *fakeDir
	}{
		{"group", "rfc2307", "(cn=research)", rfc2307Dir},
		{"users", "rfc2307", "(objectClass=posixAccount)", rfc2307Dir},
		{"their groups", "rfc2307", "(memberUid=alice)", rfc2307Dir},
		{"users by DN", "rfc2307bis", "(objectClass=posixAccount)", bisDir},
		{"their groups by DN", "rfc2307bis", "(member=uid=alice", bisDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.dir()
			f.fail = func(req *ldap.SearchRequest) error {
				if strings.Contains(req.Filter, tc.filterPart) {
					return ldap.NewError(ldap.LDAPResultBusy, errors.New("server is busy"))
				}
				return nil
			}
			users, warnings, err := testClient(t, Config{Schema: tc.schema}, f).Members(context.Background(), "research")
			if err == nil || !ldap.IsErrorWithCode(err, ldap.LDAPResultBusy) || errors.Is(err, ErrNoSuchGroup) {
				t.Errorf("err = %v, want the server's busy error", err)
			}
			if users != nil || warnings != nil {
				t.Errorf("got users %v, warnings %q with the error", users, warnings)
			}
		})
	}
}

func TestMembersFailsClosedOnLimits(t *testing.T) {
	// research has 2 members; alice and bob's groups are 5 entries.
	for _, tc := range []struct {
		limit int
		want  string
	}{{1, "has 2 members, more than the 1 read"}, {4, "Size Limit Exceeded"}} {
		c := testClient(t, Config{}, rfc2307Dir())
		c.limit = tc.limit
		users, _, err := c.Members(context.Background(), "research")
		if err == nil || !strings.Contains(err.Error(), tc.want) || users != nil {
			t.Errorf("limit %d: users %v, err %v; want an error with %q", tc.limit, users, err, tc.want)
		}
	}
}

func TestMembersBatchesLargeGroups(t *testing.T) {
	f := rfc2307Dir()
	kv := []string{"objectClass", "posixGroup", "cn", "big", "gidNumber", "5000"}
	var want []User
	for i := range 2*batchSize + 1 {
		name := fmt.Sprintf("u%03d", i)
		f.entries = append(f.entries, posixUser(name, 10000+i)...)
		kv = append(kv, "memberUid", name)
		want = append(want, User{Name: name, UID: int64(10000 + i), GID: int64(10000 + i), Home: "/home/" + name,
			Shell: DefaultShell, Groups: []Group{{"big", 5000}, {name, int64(10000 + i)}}})
	}
	f.entries = append(f.entries, entry(groupDN("big"), kv...))
	users, warnings, err := testClient(t, Config{}, f).Members(context.Background(), "big")
	if err != nil || len(warnings) != 0 {
		t.Fatal(err, warnings)
	}
	checkUsers(t, users, want)
	if len(f.requests) != 1+3+3 {
		t.Errorf("%d searches, want 1 for the group and 3 batches each of users and their groups", len(f.requests))
	}
}

// bisDir is an rfc2307bis directory: research lists alice, bob (by a DN spelled differently from
// bob's entry), a nested group, a DN without an entry and a user outside the search base.
func bisDir() *fakeDir {
	f := &fakeDir{entries: []*ldap.Entry{
		entry(base, "objectClass", "dcObject"),
		entry(groupDN("research"), "objectClass", "posixGroup", "objectClass", "groupOfNames", "cn", "research", "gidNumber", "2000",
			"member", userDN("alice"), "member", "UID=Bob, ou=People,dc=example,dc=org", "member", "uid=alice, ou=people,dc=example,dc=org", "member", groupDN("admins"),
			"member", userDN("ghost"), "member", "uid=eve,ou=people,dc=other,dc=org"),
		entry(groupDN("gpu"), "objectClass", "posixGroup", "cn", "gpu", "gidNumber", "3000", "member", userDN("alice")),
		entry(groupDN("admins"), "objectClass", "posixGroup", "cn", "admins", "gidNumber", "2100", "member", userDN("bob")),
		entry("uid=eve,ou=people,dc=other,dc=org", "objectClass", "posixAccount", "uid", "eve", "uidNumber", "1005", "gidNumber", "1005"),
	}}
	f.entries = append(f.entries, posixUser("alice", 1001, "loginShell", "/bin/zsh",
		"sshPublicKey", "ssh-ed25519 AAAA1 alice@a", "sshPublicKey", "ssh-rsa AAAA2 alice@b")...)
	f.entries = append(f.entries, posixUser("bob", 1002)...)
	return f
}

func TestMembersRFC2307bis(t *testing.T) {
	f := bisDir()
	users, warnings, err := testClient(t, Config{Schema: "rfc2307bis"}, f).Members(context.Background(), "research")
	if err != nil {
		t.Fatal(err)
	}
	a := alice
	a.Groups = []Group{{"alice", 1001}, {"gpu", 3000}, {"research", 2000}}
	b := bob
	b.Groups = []Group{{"admins", 2100}, {"bob", 1002}, {"research", 2000}}
	checkUsers(t, users, []User{a, b})
	want := []string{groupDN("admins") + ` of group "research" is not a posixAccount entry`,
		userDN("ghost") + ` of group "research" has no entry`,
		`uid=eve,ou=people,dc=other,dc=org of group "research" is outside the user search base`}
	if len(warnings) != len(want) {
		t.Fatalf("warnings: %q, want %d", warnings, len(want))
	}
	for i, w := range want {
		if !strings.Contains(warnings[i], w) {
			t.Errorf("warning %q, want it to say %q", warnings[i], w)
		}
	}
}

func TestMembersRejectsRangedMembers(t *testing.T) {
	f := &fakeDir{entries: []*ldap.Entry{
		entry("cn=big,"+base, "objectClass", "group", "name", "big", "member;range=0-1499", userDN("alice")),
	}}
	_, _, err := testClient(t, Config{Schema: "ad"}, f).Members(context.Background(), "big")
	if err == nil || !strings.Contains(err.Error(), "ranged retrieval") {
		t.Errorf("err = %v, want ranged retrieval refused", err)
	}
}

func TestMembersHonoursContext(t *testing.T) {
	f := rfc2307Dir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, _, err := testClient(t, Config{}, f).Members(ctx, "research"); err != nil {
		t.Fatal(err)
	}
	for _, d := range f.timeouts {
		if d <= 0 || d > 3*time.Second {
			t.Errorf("request timeout %v, want at most the context's 3s", d)
		}
	}
	if _, _, err := testClient(t, Config{}, f).Members(context.Background(), "research"); err != nil {
		t.Fatal(err)
	}
	if got := f.timeouts[len(f.timeouts)-1]; got != defaultTimeout {
		t.Errorf("request timeout without a deadline %v, want %v", got, defaultTimeout)
	}

	f = rfc2307Dir()
	cancel()
	if _, _, err := testClient(t, Config{}, f).Members(ctx, "research"); !errors.Is(err, context.Canceled) || len(f.requests) != 0 {
		t.Errorf("cancelled: err %v after %d searches, want context.Canceled before any", err, len(f.requests))
	}
}
