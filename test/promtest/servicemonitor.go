package promtest

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Target is one endpoint to scrape, with the labels the Prometheus Operator gives it.
type Target struct {
	Address string
	Labels  map[string]string
}

// Discover finds the targets of a monitor's endpoint: the ready endpoints, on the port named
// port, of the Services in namespaces whose labels include matchLabels.
type Discover func(namespaces []string, matchLabels map[string]string, port string) ([]Target, error)

// ScrapeConfigs turns a Prometheus Operator ServiceMonitor into the scrape configurations the
// operator would give Prometheus for it: per endpoint, the targets discover finds, scraped
// with the endpoint's path, scheme, intervals and TLS settings, labelled namespace, service,
// pod, job (the Service's name) and endpoint as the operator labels them. A bearer token file
// of the endpoint, a path inside Prometheus's pod, is replaced by tokenFile. The test bed has
// no Prometheus Operator, and Debian's Prometheus is built without Kubernetes discovery: this
// keeps the tests reading the monitors the chart renders instead of a configuration of their
// own. Fields it does not know are an error, so that a chart change cannot pass unread.
func ScrapeConfigs(sm *unstructured.Unstructured, tokenFile string, discover Discover) ([]any, error) {
	spec, _ := sm.Object["spec"].(map[string]any)
	if spec == nil {
		return nil, fmt.Errorf("ServiceMonitor %s: no spec", sm.GetName())
	}
	if err := knownFields("ServiceMonitor "+sm.GetName()+" spec", spec, "selector", "namespaceSelector", "endpoints"); err != nil {
		return nil, err
	}
	matchLabels, _, err := unstructured.NestedStringMap(spec, "selector", "matchLabels")
	if err != nil {
		return nil, err
	}
	namespaces, found, err := unstructured.NestedStringSlice(spec, "namespaceSelector", "matchNames")
	if err != nil {
		return nil, err
	}
	if !found {
		namespaces = []string{sm.GetNamespace()}
	}
	endpoints, _, err := unstructured.NestedSlice(spec, "endpoints")
	if err != nil {
		return nil, err
	}
	var out []any
	for i, e := range endpoints {
		ep, _ := e.(map[string]any)
		where := fmt.Sprintf("ServiceMonitor %s/%s endpoints[%d]", sm.GetNamespace(), sm.GetName(), i)
		if err := knownFields(where, ep, "port", "path", "interval", "scrapeTimeout", "scheme", "tlsConfig", "bearerTokenFile"); err != nil {
			return nil, err
		}
		port, _ := ep["port"].(string)
		if port == "" {
			return nil, fmt.Errorf("%s: no port name", where)
		}
		targets, err := discover(namespaces, matchLabels, port)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		var static []any
		for _, t := range targets {
			static = append(static, map[string]any{"targets": []string{t.Address}, "labels": t.Labels})
		}
		c := map[string]any{
			"job_name":       fmt.Sprintf("serviceMonitor/%s/%s/%d", sm.GetNamespace(), sm.GetName(), i),
			"static_configs": static,
			"metrics_path":   stringOr(ep, "path", "/metrics"),
			"scheme":         stringOr(ep, "scheme", "http"),
		}
		for from, to := range map[string]string{"interval": "scrape_interval", "scrapeTimeout": "scrape_timeout"} {
			if v, ok := ep[from].(string); ok {
				c[to] = v
			}
		}
		if tls, ok := ep["tlsConfig"].(map[string]any); ok {
			if err := knownFields(where+".tlsConfig", tls, "insecureSkipVerify"); err != nil {
				return nil, err
			}
			c["tls_config"] = map[string]any{"insecure_skip_verify": tls["insecureSkipVerify"] == true}
		}
		if _, ok := ep["bearerTokenFile"]; ok {
			c["authorization"] = map[string]any{"credentials_file": tokenFile}
		}
		out = append(out, c)
	}
	return out, nil
}

func stringOr(m map[string]any, key, def string) string {
	if v, ok := m[key].(string); ok && v != "" {
		return v
	}
	return def
}

func knownFields(where string, m map[string]any, known ...string) error {
	for k := range m {
		ok := false
		for _, kn := range known {
			ok = ok || k == kn
		}
		if !ok {
			return fmt.Errorf("%s: field %q is not translated by promtest.ScrapeConfigs", where, k)
		}
	}
	return nil
}
