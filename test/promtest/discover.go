package promtest

import (
	"context"
	"fmt"
	"net"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// KubeDiscover finds targets the way Prometheus's Kubernetes endpoints discovery does for a
// ServiceMonitor: the Services matching the selector, and the ready addresses of their
// EndpointSlices on the named port.
func KubeDiscover(ctx context.Context, cs kubernetes.Interface) Discover {
	return func(namespaces []string, matchLabels map[string]string, port string) ([]Target, error) {
		var out []Target
		for _, ns := range namespaces {
			svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(matchLabels).String()})
			if err != nil {
				return nil, err
			}
			for _, svc := range svcs.Items {
				slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
					LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
				if err != nil {
					return nil, err
				}
				for _, sl := range slices.Items {
					out = append(out, sliceTargets(sl, svc.Name, port)...)
				}
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no ready endpoint on port %q of a Service labelled %v in %v", port, matchLabels, namespaces)
		}
		return out, nil
	}
}

func sliceTargets(sl discoveryv1.EndpointSlice, service, port string) []Target {
	var out []Target
	for _, p := range sl.Ports {
		if p.Name == nil || *p.Name != port || p.Port == nil {
			continue
		}
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			pod := ""
			if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
				pod = e.TargetRef.Name
			}
			for _, a := range e.Addresses {
				out = append(out, Target{
					Address: net.JoinHostPort(a, strconv.Itoa(int(*p.Port))),
					Labels:  map[string]string{"namespace": sl.Namespace, "service": service, "pod": pod, "job": service, "endpoint": port},
				})
			}
		}
	}
	return out
}
