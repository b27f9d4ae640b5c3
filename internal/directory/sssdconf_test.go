package directory

import (
	"reflect"
	"strings"
	"testing"
)

// chartConf is the sssd.conf the project's chart writes.
const chartConf = `[sssd]
services = nss, pam, ssh
domains = directory

[domain/directory]
id_provider = ldap
auth_provider = none
ldap_uri = ldap://mycluster-directory.ns.svc
ldap_search_base = dc=example,dc=org
ldap_schema = rfc2307
ldap_id_use_start_tls = false
offline_timeout = 5
`

func TestParseSSSDConf(t *testing.T) {
	chart := Config{
		URIs: []string{"ldap://mycluster-directory.ns.svc"}, SearchBase: base,
		UserSearchBase: base, GroupSearchBase: base, Schema: "rfc2307", Domain: "directory",
	}
	with := func(f func(*Config)) Config {
		c := chart
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name, conf string
		want       Config
		wantErr    string
	}{
		{name: "chart", conf: chartConf, want: chart},
		{name: "first ldap domain in domains order", conf: `
[sssd]
domains = local, second,directory
[domain/directory]
id_provider = ldap
ldap_uri = ldap://mycluster-directory.ns.svc
ldap_search_base = dc=example,dc=org
[domain/local]
id_provider = files
[domain/second]
id_provider = LDAP
ldap_uri = ldaps://second.example.org
ldap_search_base = dc=second
`, want: Config{URIs: []string{"ldaps://second.example.org"}, SearchBase: "dc=second", UserSearchBase: "dc=second",
			GroupSearchBase: "dc=second", Schema: "rfc2307", Domain: "second"}},
		{name: "unlisted domain enabled", conf: "[sssd]\n[domain/directory]\nenabled = true\n" + chartConf[strings.Index(chartConf, "id_provider"):],
			want: chart},
		{name: "listed domain disabled", conf: strings.Replace(chartConf, "id_provider", "enabled = false\nid_provider", 1),
			wantErr: "none of the domains directory has id_provider = ldap"},
		{name: "comments, case and CRLF", conf: strings.ReplaceAll(`# written by hand
[SSSD]
; the only domain
Domains = directory
[domain/directory]
  # indented comment
ID_Provider = ldap
LDAP_URI = ldap://mycluster-directory.ns.svc
ldap_search_base=dc=example,dc=org
ldap_user_search_base = ou=people#1,dc=example,dc=org
`, "\n", "\r\n"), want: with(func(c *Config) { c.UserSearchBase = "ou=people#1,dc=example,dc=org" })},
		{name: "bind DN", conf: chartConf + `ldap_default_bind_dn = cn=reader,dc=example,dc=org
ldap_default_authtok_type = password
ldap_default_authtok = s3cr=t#;x
ldap_id_use_start_tls = True
`, want: with(func(c *Config) {
			c.BindDN, c.BindPassword, c.StartTLS = "cn=reader,dc=example,dc=org", "s3cr=t#;x", true
		})},
		{name: "obfuscated bind password", conf: chartConf + "ldap_default_bind_dn = cn=reader\nldap_default_authtok_type = obfuscated_password\nldap_default_authtok = AAAQ\n",
			wantErr: "[domain/directory] ldap_default_authtok_type = obfuscated_password is not supported"},
		{name: "bind DN without password", conf: chartConf + "ldap_default_bind_dn = cn=reader\n",
			wantErr: "[domain/directory] has ldap_default_bind_dn but no ldap_default_authtok"},
		{name: "rfc2307bis with TLS options and attribute maps", conf: `[sssd]
domains = corp
[domain/corp]
id_provider = ldap
ldap_uri = ldaps://dir.example.org
ldap_schema = RFC2307bis
ldap_user_search_base = ou=people,dc=corp
ldap_group_search_base = ou=groups,dc=corp
ldap_user_name = cn
ldap_tls_reqcert = never
ldap_tls_cacert = /etc/sssd/ca.crt
`, want: Config{URIs: []string{"ldaps://dir.example.org"}, UserSearchBase: "ou=people,dc=corp",
			GroupSearchBase: "ou=groups,dc=corp", Schema: "rfc2307bis", Domain: "corp", InsecureSkipVerify: true,
			CACertPath: "/etc/sssd/ca.crt", Attributes: map[string]string{"ldap_user_name": "cn"}}},
		{name: "comma-separated URIs", conf: strings.Replace(chartConf, "ldap_uri = ldap://mycluster-directory.ns.svc",
			"ldap_uri = ldap://a.example.org, ldaps://b.example.org:636 ,", 1),
			want: with(func(c *Config) { c.URIs = []string{"ldap://a.example.org", "ldaps://b.example.org:636"} })},
		{name: "missing ldap_uri", conf: strings.Replace(chartConf, "ldap_uri", "# ldap_uri", 1),
			wantErr: "sssd.conf: [domain/directory] has no ldap_uri"},
		{name: "DNS discovery URI", conf: strings.Replace(chartConf, "ldap://mycluster-directory.ns.svc", "_srv_", 1),
			wantErr: `[domain/directory] ldap_uri: "_srv_" is not an ldap:// or ldaps:// server URI`},
		{name: "no ldap domain", conf: "[sssd]\ndomains = local\n[domain/local]\nid_provider = files\n",
			wantErr: "sssd.conf: none of the domains local has id_provider = ldap"},
		{name: "no domains", conf: "[sssd]\nservices = nss\n", wantErr: "sssd.conf: no domains"},
		{name: "missing search base", conf: strings.Replace(chartConf, "ldap_search_base", "#", 1),
			wantErr: "[domain/directory] has no ldap_search_base (nor ldap_user_search_base)"},
		{name: "search base with scope and filter", conf: chartConf + "ldap_group_search_base = ou=groups,dc=example,dc=org?subtree?(cn=a*)\n",
			wantErr: "[domain/directory] ldap_group_search_base: the base?scope?filter syntax is not supported"},
		{name: "unknown schema", conf: strings.Replace(chartConf, "rfc2307", "nis", 1),
			wantErr: `[domain/directory]: unknown ldap_schema "nis"`},
		{name: "attribute map that is no attribute", conf: chartConf + "ldap_user_name = uid)(x=y\n",
			wantErr: `[domain/directory]: ldap_user_name: "uid)(x=y" is not an attribute name`},
		{name: "bad start_tls", conf: strings.Replace(chartConf, "ldap_id_use_start_tls = false", "ldap_id_use_start_tls = maybe", 1),
			wantErr: `[domain/directory] ldap_id_use_start_tls: "maybe" is not true or false`},
		{name: "key outside a section", conf: "domains = directory\n" + chartConf, wantErr: `sssd.conf: line 1: "domains" is outside any [section]`},
		{name: "line without value", conf: chartConf + "ldap_uri\n", wantErr: "sssd.conf: line 13: want key = value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSSSDConf([]byte(tc.conf))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
