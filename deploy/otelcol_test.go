package deploy

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// collectorConfig is the part of an OpenTelemetry Collector config the checks below read.
type collectorConfig struct {
	Exporters map[string]struct {
		RoutingKey        string   `json:"routing_key"`
		RoutingAttributes []string `json:"routing_attributes"`
		Resolver          struct {
			Static *struct {
				Hostnames []string `json:"hostnames"`
			} `json:"static"`
			K8s *struct {
				Service string `json:"service"`
				Ports   []int  `json:"ports"`
			} `json:"k8s"`
		} `json:"resolver"`
	} `json:"exporters"`
	Processors map[string]struct {
		TraceStatements []string `json:"trace_statements"`
		LogStatements   []string `json:"log_statements"`
	} `json:"processors"`
	Service struct {
		Pipelines map[string]struct {
			Receivers  []string `json:"receivers"`
			Processors []string `json:"processors"`
			Exporters  []string `json:"exporters"`
		} `json:"pipelines"`
	} `json:"service"`
}

func readCollectorConfig(t *testing.T, path string) collectorConfig {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c collectorConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// The Collector configs route spans and log records by their trace id, both as the same
// attribute (the exporter hashes the traceID key of each signal differently); the Kubernetes
// manifest mounts the k8s variant
// byte for byte, resolves the replicas' headless Service on its OTLP port, and has the RBAC the
// resolver needs. (e2e/otelcol_test.go runs the configs in a real Collector.)
func TestOtelcolConfigs(t *testing.T) {
	const routeProcessor, routeAttr = "transform/route-by-trace-id", "ragwatch.route.trace_id"
	for path, resolver := range map[string]string{"otelcol/loadbalancing.yaml": "static", "otelcol/loadbalancing-k8s.yaml": "k8s"} {
		c := readCollectorConfig(t, path)
		lb, ok := c.Exporters["load_balancing"]
		if !ok || lb.RoutingKey != "attributes" || len(lb.RoutingAttributes) != 1 || lb.RoutingAttributes[0] != routeAttr {
			t.Errorf("%s: load_balancing exporter %+v, want routing_key attributes on %s", path, lb, routeAttr)
		}
		tr := c.Processors[routeProcessor]
		if len(tr.TraceStatements) != 1 || tr.TraceStatements[0] != `set(span.attributes["`+routeAttr+`"], span.trace_id.string)` ||
			len(tr.LogStatements) != 1 || tr.LogStatements[0] != `set(log.attributes["`+routeAttr+`"], log.trace_id.string)` {
			t.Errorf("%s: %s %+v, want the trace id as hex in %s on every span and log record", path, routeProcessor, tr, routeAttr)
		}
		if (resolver == "static") != (lb.Resolver.Static != nil) || (resolver == "k8s") != (lb.Resolver.K8s != nil) {
			t.Errorf("%s: resolver %+v, want %s", path, lb.Resolver, resolver)
		}
		// Logs too, by the same trace id: GenAI events reach the replica holding their trace.
		for _, signal := range []string{"traces", "logs"} {
			p := c.Service.Pipelines[signal]
			if len(p.Exporters) != 1 || p.Exporters[0] != "load_balancing" || len(p.Processors) == 0 || p.Processors[len(p.Processors)-1] != routeProcessor {
				t.Errorf("%s: %s pipeline %+v, want %s last, then load_balancing", path, signal, p, routeProcessor)
			}
		}
	}
	tee := readCollectorConfig(t, "otelcol/tee.yaml")
	if p := tee.Service.Pipelines["traces/ragwatch"]; len(p.Processors) != 1 || p.Exporters[0] != "otlp_grpc/ragwatch" {
		t.Errorf("tee.yaml: ragwatch pipeline %+v", p)
	}
	if p := tee.Service.Pipelines["logs/ragwatch"]; len(p.Processors) != 1 || len(p.Exporters) != 1 || p.Exporters[0] != "otlp_grpc/ragwatch" {
		t.Errorf("tee.yaml: ragwatch logs pipeline %+v", p)
	}

	k8sConfig, err := os.ReadFile("otelcol/loadbalancing-k8s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("otelcol/kubernetes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var mounted string
	var role *rbacv1.Role
	var collector *appsv1.Deployment
	for _, o := range decodeStrict(t, "otelcol/kubernetes.yaml", data) {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			mounted = o.Data["otelcol.yaml"]
		case *rbacv1.Role:
			role = o
		case *appsv1.Deployment:
			collector = o
		}
	}
	if mounted != string(k8sConfig) {
		t.Error("otelcol/kubernetes.yaml: the ConfigMap's otelcol.yaml differs from otelcol/loadbalancing-k8s.yaml")
	}
	if role == nil || len(role.Rules) != 1 || role.Rules[0].Resources[0] != "endpointslices" ||
		strings.Join(role.Rules[0].Verbs, ",") != "get,list,watch" {
		t.Errorf("otelcol/kubernetes.yaml: Role %+v, want get, list, watch on endpointslices", role)
	}
	if collector == nil || collector.Spec.Template.Spec.ServiceAccountName != "otelcol-ragwatch" {
		t.Error("otelcol/kubernetes.yaml: the Collector Deployment does not run as the ServiceAccount bound to the Role")
	}

	// The resolver names the headless Service of the central replicas, on its OTLP port.
	k8s := readCollectorConfig(t, "otelcol/loadbalancing-k8s.yaml").Exporters["load_balancing"].Resolver.K8s
	central, err := os.ReadFile("kubernetes/ragwatch-central.yaml")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range decodeStrict(t, "kubernetes/ragwatch-central.yaml", central) {
		svc, ok := o.(*corev1.Service)
		if !ok || !strings.HasPrefix(k8s.Service, svc.Name+".") {
			continue
		}
		found = true
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("Service %s is not headless: the resolver needs one address per pod", svc.Name)
		}
		ports := map[int]bool{}
		for _, p := range svc.Spec.Ports {
			ports[int(p.Port)] = true
		}
		for _, p := range k8s.Ports {
			if !ports[p] {
				t.Errorf("resolver port %d is not a port of Service %s", p, svc.Name)
			}
		}
	}
	if !found {
		t.Errorf("resolver service %q names no Service of kubernetes/ragwatch-central.yaml", k8s.Service)
	}
}
