package directory

import (
	"bufio"
	"bytes"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// ParseSSSDConf reads sssd.conf into the Config of its first domain, in [sssd] domains order,
// whose id_provider is ldap: the domain SSSD resolves users from first, so the one whose users
// log in to the cluster.
//
// Errors name the section and key at fault, since they end up in an event for whoever wrote the
// file. Options the operator cannot honour the way SSSD would (an obfuscated bind password,
// sssd's base?scope?filter search bases, DNS discovery of servers) are errors rather than being
// ignored, because ignoring them would search another part of the directory, or none.
func ParseSSSDConf(data []byte) (Config, error) {
	sections, order, err := parseINI(data)
	if err != nil {
		return Config{}, err
	}
	var domains []string
	for d := range strings.SplitSeq(sections["sssd"]["domains"], ",") {
		if d = strings.TrimSpace(d); d != "" && !slices.Contains(domains, d) {
			domains = append(domains, d)
		}
	}
	// SSSD also runs domains that are not listed but say enabled = true.
	for _, name := range order {
		if d, ok := strings.CutPrefix(name, "domain/"); ok && isTrue(sections[name]["enabled"]) && !slices.Contains(domains, d) {
			domains = append(domains, d)
		}
	}
	for _, d := range domains {
		sec, ok := sections["domain/"+d]
		if !ok || !strings.EqualFold(sec["id_provider"], "ldap") || isFalse(sec["enabled"]) {
			continue
		}
		return domainConfig(d, sec)
	}
	if len(domains) == 0 {
		return Config{}, fmt.Errorf("sssd.conf: no domains: [sssd] lists none in domains and no [domain/...] section has enabled = true")
	}
	return Config{}, fmt.Errorf("sssd.conf: none of the domains %s has id_provider = ldap", strings.Join(domains, ", "))
}

func domainConfig(name string, sec map[string]string) (Config, error) {
	where := "sssd.conf: [domain/" + name + "]"
	cfg := Config{
		Domain:          name,
		SearchBase:      sec["ldap_search_base"],
		UserSearchBase:  sec["ldap_user_search_base"],
		GroupSearchBase: sec["ldap_group_search_base"],
		Schema:          strings.ToLower(sec["ldap_schema"]),
		BindDN:          sec["ldap_default_bind_dn"],
		CACertPath:      sec["ldap_tls_cacert"],
	}
	uris, ok := sec["ldap_uri"]
	if !ok || strings.TrimSpace(uris) == "" {
		return Config{}, fmt.Errorf("%s has no ldap_uri (discovering servers through DNS is not supported)", where)
	}
	for u := range strings.SplitSeq(uris, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "ldap" && p.Scheme != "ldaps") || p.Host == "" {
			return Config{}, fmt.Errorf("%s ldap_uri: %q is not an ldap:// or ldaps:// server URI", where, u)
		}
		cfg.URIs = append(cfg.URIs, u)
	}
	if cfg.Schema == "" {
		cfg.Schema = "rfc2307"
	}
	for _, k := range attrOptions {
		if v, ok := sec[k]; ok {
			if cfg.Attributes == nil {
				cfg.Attributes = map[string]string{}
			}
			cfg.Attributes[k] = v
		}
	}
	if _, err := cfg.attrs(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", where, err)
	}
	if cfg.UserSearchBase == "" {
		cfg.UserSearchBase = cfg.SearchBase
	}
	if cfg.GroupSearchBase == "" {
		cfg.GroupSearchBase = cfg.SearchBase
	}
	for _, kb := range [][2]string{{"ldap_user_search_base", cfg.UserSearchBase}, {"ldap_group_search_base", cfg.GroupSearchBase}} {
		key, base := kb[0], kb[1]
		if base == "" {
			// SSSD would ask the server's rootDSE; the operator does not, to search exactly
			// where the file says.
			return Config{}, fmt.Errorf("%s has no ldap_search_base (nor %s)", where, key)
		}
		if strings.Contains(base, "?") {
			return Config{}, fmt.Errorf("%s %s: the base?scope?filter syntax is not supported: %q", where, key, base)
		}
	}
	if v, ok := sec["ldap_id_use_start_tls"]; ok {
		if !isTrue(v) && !isFalse(v) {
			return Config{}, fmt.Errorf("%s ldap_id_use_start_tls: %q is not true or false", where, v)
		}
		cfg.StartTLS = isTrue(v)
	}
	switch v := strings.ToLower(sec["ldap_tls_reqcert"]); v {
	case "never", "allow":
		cfg.InsecureSkipVerify = true
	case "", "try", "demand", "hard":
	default:
		return Config{}, fmt.Errorf("%s ldap_tls_reqcert: unknown value %q", where, v)
	}
	if cfg.BindDN != "" {
		switch t := strings.ToLower(sec["ldap_default_authtok_type"]); t {
		case "", "password":
			cfg.BindPassword = sec["ldap_default_authtok"]
		default:
			return Config{}, fmt.Errorf("%s ldap_default_authtok_type = %s is not supported (only password)", where, t)
		}
		if cfg.BindPassword == "" {
			return Config{}, fmt.Errorf("%s has ldap_default_bind_dn but no ldap_default_authtok", where)
		}
	}
	return cfg, nil
}

// parseINI reads the INI dialect of SSSD's configuration: [section] headers, key = value lines
// with case-insensitive keys, values that may hold '=' and '#', and whole-line '#' or ';'
// comments. Section names are kept as written but for the case of "sssd" and "domain/", which
// SSSD matches loosely; domain names themselves are case-sensitive. A later key overrides an
// earlier one. order lists the sections as they first appear.
func parseINI(data []byte) (sections map[string]map[string]string, order []string, err error) {
	sections = map[string]map[string]string{}
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case line[0] == '[':
			if !strings.HasSuffix(line, "]") {
				return nil, nil, fmt.Errorf("sssd.conf: line %d: unterminated section header %q", n, line)
			}
			cur = strings.TrimSpace(line[1 : len(line)-1])
			if strings.EqualFold(cur, "sssd") {
				cur = "sssd"
			} else if len(cur) > len("domain/") && strings.EqualFold(cur[:len("domain/")], "domain/") {
				cur = "domain/" + strings.TrimSpace(cur[len("domain/"):])
			}
			if _, ok := sections[cur]; !ok {
				sections[cur] = map[string]string{}
				order = append(order, cur)
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, nil, fmt.Errorf("sssd.conf: line %d: want key = value, got %q", n, line)
		}
		if cur == "" {
			return nil, nil, fmt.Errorf("sssd.conf: line %d: %q is outside any [section]", n, strings.TrimSpace(k))
		}
		sections[cur][strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("sssd.conf: %w", err)
	}
	return sections, order, nil
}

func isTrue(v string) bool {
	return strings.EqualFold(v, "true") || strings.EqualFold(v, "yes")
}

func isFalse(v string) bool {
	return strings.EqualFold(v, "false") || strings.EqualFold(v, "no")
}
