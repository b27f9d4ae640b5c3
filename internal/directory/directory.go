// Package directory reads users and groups from the LDAP directory a cluster's sssd.conf names,
// so that the operator can learn the members of a POSIX group and give each one a login pod of
// their own. sssd.conf is the only description of the directory the operator has, so the
// package reads the same options SSSD does (ParseSSSDConf) and searches the directory the way
// SSSD's ldap provider would (Client.Members).
//
// Everything here fails closed: a member list the package cannot read in full is an error, never
// a shorter list, because the caller deletes the login pods of users missing from it.
package directory

import (
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrNoSuchGroup is wrapped by Members' error when the directory has no group of the name asked
// for, so that callers can tell a misnamed group (a user error to report) from a directory that
// could not be read (to retry).
var ErrNoSuchGroup = errors.New("no such group in the directory")

// Config is what the operator needs of sssd.conf to search the directory.
type Config struct {
	// URIs are ldap_uri's servers, tried in order as SSSD fails over.
	URIs []string
	// SearchBase is ldap_search_base.
	SearchBase string
	// UserSearchBase and GroupSearchBase are ldap_user_search_base and ldap_group_search_base;
	// ParseSSSDConf defaults them to SearchBase, and so does Members when they are empty.
	UserSearchBase, GroupSearchBase string
	// Schema is ldap_schema: "rfc2307" (the default; memberUid holds user names), or
	// "rfc2307bis", "ipa" or "ad" (member holds user DNs).
	Schema string
	// Attributes are the attribute-name options of sssd.conf's ldap_user_* and ldap_group_*
	// maps that the domain sets (for example "ldap_user_name": "cn"), keyed by option name.
	// They override Schema's defaults, as in SSSD; a directory with renamed attributes would
	// otherwise read as users without uidNumber, and lose their pods.
	Attributes map[string]string
	// BindDN and BindPassword are ldap_default_bind_dn and ldap_default_authtok; both empty
	// means an anonymous bind.
	BindDN, BindPassword string
	// StartTLS is ldap_id_use_start_tls: upgrade ldap:// connections before binding.
	StartTLS bool
	// InsecureSkipVerify is set by ldap_tls_reqcert = never or allow, with which SSSD itself
	// accepts any server certificate; the operator should not be stricter than the cluster's
	// own logins, or it would see a directory they can use as unreachable.
	InsecureSkipVerify bool
	// CACertPath is ldap_tls_cacert: a path inside SSSD's pods that the operator cannot read.
	// It is recorded only so that the caller knows the directory's certificates come from a
	// private CA; the caller must load that CA and supply it as RootCAs.
	CACertPath string
	// RootCAs verifies ldaps:// and StartTLS servers; nil means the system roots.
	RootCAs *x509.CertPool
	// Domain is the name of the sssd.conf domain section the Config was read from.
	Domain string
}

// User is a directory user as a login pod needs them.
type User struct {
	Name string
	// UID and GID are uidNumber and gidNumber.
	UID, GID int64
	// Groups are every POSIX group listing the user, and their primary group if it exists as a
	// group entry, sorted by name: the supplementary groups their processes run with.
	Groups []Group
	// Home and Shell are homeDirectory and loginShell; Shell is "/bin/bash" when absent.
	Home, Shell string
	// SSHKeys are the user's sshPublicKey values, in directory order.
	SSHKeys []string
}

// Group is a POSIX group.
type Group struct {
	Name string
	GID  int64
}

// DefaultShell is User.Shell for users without a loginShell, as SSSD leaves it to the login pod's
// image and the image the project ships logs in with bash.
const DefaultShell = "/bin/bash"

// attrMap names the attributes Members reads, per SSSD's option of the same role.
type attrMap struct {
	userClass, userName, uidNumber, gidNumber, home, shell, sshKey string
	groupClass, groupName, groupGID, groupMember                   string
	// memberIsDN says whether groupMember holds DNs (rfc2307bis, ipa, ad) or user names
	// (rfc2307), which the schema decides in SSSD whatever the attribute is called.
	memberIsDN bool
}

// attrOptions are the sssd.conf options that rename attributes Members reads.
var attrOptions = []string{
	"ldap_user_object_class", "ldap_user_name", "ldap_user_uid_number", "ldap_user_gid_number",
	"ldap_user_home_directory", "ldap_user_shell", "ldap_user_ssh_public_key",
	"ldap_group_object_class", "ldap_group_name", "ldap_group_gid_number", "ldap_group_member",
}

// attrName is an LDAP attribute description: a name or OID, with options such as ";binary".
var attrName = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9-]*|[0-9]+(\.[0-9]+)*)(;[A-Za-z0-9-]+)*$`)

// attrs are the attribute names cfg's schema and overrides give, from SSSD's defaults
// (src/providers/ldap/ldap_opts.c): ipa reads like rfc2307bis, and ad has its own names.
func (cfg Config) attrs() (attrMap, error) {
	m := attrMap{
		userClass: "posixAccount", userName: "uid", uidNumber: "uidNumber", gidNumber: "gidNumber",
		home: "homeDirectory", shell: "loginShell", sshKey: "sshPublicKey",
		groupClass: "posixGroup", groupName: "cn", groupGID: "gidNumber", groupMember: "memberUid",
	}
	switch cfg.Schema {
	case "", "rfc2307":
	case "rfc2307bis", "ipa":
		m.groupMember, m.memberIsDN = "member", true
	case "ad":
		m.userClass, m.userName, m.home, m.sshKey = "user", "sAMAccountName", "unixHomeDirectory", ""
		m.groupClass, m.groupName, m.groupMember, m.memberIsDN = "group", "name", "member", true
	default:
		return attrMap{}, fmt.Errorf("unknown ldap_schema %q (want rfc2307, rfc2307bis, ipa or ad)", cfg.Schema)
	}
	fields := map[string]*string{
		"ldap_user_object_class": &m.userClass, "ldap_user_name": &m.userName,
		"ldap_user_uid_number": &m.uidNumber, "ldap_user_gid_number": &m.gidNumber,
		"ldap_user_home_directory": &m.home, "ldap_user_shell": &m.shell,
		"ldap_user_ssh_public_key": &m.sshKey, "ldap_group_object_class": &m.groupClass,
		"ldap_group_name": &m.groupName, "ldap_group_gid_number": &m.groupGID,
		"ldap_group_member": &m.groupMember,
	}
	for opt, v := range cfg.Attributes {
		f, ok := fields[opt]
		if !ok {
			return attrMap{}, fmt.Errorf("unsupported attribute option %s", opt)
		}
		*f = v
	}
	for _, opt := range attrOptions {
		f := *fields[opt]
		optional := opt == "ldap_user_ssh_public_key" || opt == "ldap_user_home_directory" || opt == "ldap_user_shell"
		if f == "" && !optional {
			return attrMap{}, fmt.Errorf("%s is empty", opt)
		}
		// Attribute names go into filters unescaped, as they cannot be escaped.
		if f != "" && !strings.HasSuffix(opt, "_object_class") && !attrName.MatchString(f) {
			return attrMap{}, fmt.Errorf("%s: %q is not an attribute name", opt, f)
		}
	}
	return m, nil
}
