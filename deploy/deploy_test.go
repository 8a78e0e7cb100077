package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/memlimit"
)

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor the manifests use;
// unknown fields are rejected like for the core types.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port            string   `json:"port"`
			Path            string   `json:"path"`
			Interval        string   `json:"interval"`
			ScrapeProtocols []string `json:"scrapeProtocols,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// decodeStrict splits a multi-document manifest and decodes each document into its Kubernetes
// type, rejecting unknown fields.
func decodeStrict(t *testing.T, name string, data []byte) []any {
	t.Helper()
	var out []any
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s document %d: %v", name, i, err)
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(js, &tm); err != nil {
			t.Fatalf("%s document %d: %v", name, i, err)
		}
		var obj any
		switch tm.APIVersion + "/" + tm.Kind {
		case "v1/ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1/Secret":
			obj = &corev1.Secret{}
		case "v1/Service":
			obj = &corev1.Service{}
		case "apps/v1/Deployment":
			obj = &appsv1.Deployment{}
		case "v1/ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "rbac.authorization.k8s.io/v1/Role":
			obj = &rbacv1.Role{}
		case "rbac.authorization.k8s.io/v1/RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "monitoring.coreos.com/v1/ServiceMonitor":
			obj = &serviceMonitor{}
		default:
			t.Fatalf("%s document %d: unexpected kind %s/%s", name, i, tm.APIVersion, tm.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			t.Fatalf("%s document %d (%s): %v", name, i, tm.Kind, err)
		}
		out = append(out, obj)
	}
	return out
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// checkObjects asserts what every rendering of ragwatch must hold: configs that ragwatch
// accepts, and ragwatch containers with probes, limits and a read-only root filesystem.
func checkObjects(t *testing.T, name string, objs []any) (deployments int) {
	t.Helper()
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			if c, ok := o.Data["ragwatch.yaml"]; ok {
				if _, err := config.Parse([]byte(c)); err != nil {
					t.Errorf("%s: ConfigMap %s holds a config ragwatch rejects:\n%v", name, o.Name, err)
				}
			}
		case *appsv1.Deployment:
			deployments++
			found := false
			for _, c := range o.Spec.Template.Spec.Containers {
				checkImagePinned(t, name, c.Image)
				if !strings.Contains(c.Image, "ragwatch") {
					continue
				}
				found = true
				checkGoMemLimit(t, name, c)
				if c.LivenessProbe == nil || c.ReadinessProbe == nil {
					t.Errorf("%s: %s/%s lacks probes", name, o.Name, c.Name)
				} else if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
					t.Errorf("%s: %s/%s probes %s %s", name, o.Name, c.Name, c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
				}
				if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
					t.Errorf("%s: %s/%s lacks resource requests/limits", name, o.Name, c.Name)
				}
				if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
					t.Errorf("%s: %s/%s root filesystem is not read-only", name, o.Name, c.Name)
				}
				if c.Args[0] != "run" && c.Args[0] != "worker" {
					t.Errorf("%s: %s/%s runs %q", name, o.Name, c.Name, c.Args[0])
				}
			}
			if !found {
				t.Errorf("%s: Deployment %s has no ragwatch container", name, o.Name)
			}
		}
	}
	return deployments
}

// checkImagePinned fails on an image without a tag or with :latest: a restart would run
// whatever was pushed last, untested next to the app.
func checkImagePinned(t *testing.T, file, image string) {
	t.Helper()
	ref, _, _ := strings.Cut(image, "@") // a digest pins by itself
	if strings.Contains(image, "@sha256:") {
		return
	}
	slash := strings.LastIndex(ref, "/")
	tag := ""
	if i := strings.LastIndex(ref, ":"); i > slash {
		tag = ref[i+1:]
	}
	if tag == "" || tag == "latest" {
		t.Errorf("%s: image %q is not pinned to a version (no tag or :latest)", file, image)
	}
}

// goMemLimitRE is the GOMEMLIMIT syntax: a number and an optional unit.
var goMemLimitRE = regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB|TiB)?$`)

// checkGoMemLimit wants GOMEMLIMIT where ragwatch would derive it from the cgroup
// (memlimit.GoLimit: the limit less 48 MiB, at most 90%): at 100% the GC only works hard once
// the container is already at its limit, and at 90% of a small limit there is no room for what
// the runtime does not count (the binary's pages, the off-heap tables), so the kernel evicts
// the binary's pages and the sidecar spends its CPU re-reading them.
func checkGoMemLimit(t *testing.T, file string, c corev1.Container) {
	t.Helper()
	limit := c.Resources.Limits.Memory().Value()
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		m := goMemLimitRE.FindStringSubmatch(e.Value)
		if e.ValueFrom != nil || m == nil {
			t.Errorf("%s: %s: GOMEMLIMIT must be a literal below the limit (a resourceFieldRef gives 100%%), got %q %+v", file, c.Name, e.Value, e.ValueFrom)
			return
		}
		var n int64
		fmt.Sscan(m[1], &n)
		n <<= map[string]int{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]]
		if want := memlimit.GoLimit(limit); n < want-limit/50 || n > want {
			t.Errorf("%s: %s: GOMEMLIMIT %s of a %d MiB limit, want about %d MiB (memlimit.GoLimit)", file, c.Name, e.Value, limit>>20, want>>20)
		}
		return
	}
	t.Errorf("%s: %s sets no GOMEMLIMIT", file, c.Name)
}

func TestKubernetesManifestsDecodeStrictly(t *testing.T) {
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) != 3 {
		t.Fatalf("manifests = %v, want the sidecar, the worker and the central replicas", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs := decodeStrict(t, f, data)
		if n := checkObjects(t, f, objs); n != 1 {
			t.Errorf("%s: %d Deployments, want 1", f, n)
		}
	}
}

// renderChart renders the chart as `helm template` would, with Helm's template engine setup:
// text/template, the sprig functions, include, toYaml and required.
func renderChart(t *testing.T, dir string, overrides map[string]any) map[string]string {
	t.Helper()
	readYAML := func(p string) map[string]any {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return m
	}
	chart := readYAML("Chart.yaml")
	values := readYAML("values.yaml")
	merge(values, overrides)

	root := template.New("chart")
	funcs := sprig.TxtFuncMap()
	funcs["toYaml"] = func(v any) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(string(b), "\n")
	}
	funcs["include"] = func(name string, data any) (string, error) {
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	// lookup finds nothing, as under `helm template` (no cluster).
	funcs["lookup"] = func(_, _, _, _ string) map[string]any { return map[string]any{} }
	funcs["required"] = func(msg string, v any) (any, error) {
		if v == nil || v == "" {
			return nil, fmt.Errorf("%s", msg)
		}
		return v, nil
	}
	root.Funcs(funcs).Option("missingkey=zero")
	files, _ := filepath.Glob(filepath.Join(dir, "templates", "*"))
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.New(filepath.Base(f)).Parse(string(b)); err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
	}
	data := map[string]any{
		"Values":  values,
		"Release": map[string]any{"Name": "demo", "Namespace": "default", "Service": "Helm"},
		"Chart":   map[string]any{"Name": chart["name"], "Version": chart["version"], "AppVersion": chart["appVersion"]},
	}
	out := map[string]string{}
	for _, f := range files {
		base := filepath.Base(f)
		if strings.HasPrefix(base, "_") {
			continue
		}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, base, data); err != nil {
			t.Fatalf("render %s: %v", base, err)
		}
		out[base] = buf.String()
	}
	return out
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

func TestHelmChartRendersValidObjects(t *testing.T) {
	for _, tc := range []struct {
		name        string
		values      map[string]any
		deployments int
		kinds       []string
	}{
		{"defaults", nil, 1, []string{"ConfigMap", "Deployment", "Service", "ServiceMonitor"}},
		{"with workers", map[string]any{"worker": map[string]any{"enabled": true}, "secretName": "ragwatch-secrets"}, 2,
			[]string{"ConfigMap", "ConfigMap", "Deployment", "Deployment", "Service", "ServiceMonitor"}},
		{"sidecar injection", map[string]any{"app": map[string]any{"enabled": false}, "sidecarSnippet": true, "serviceMonitor": map[string]any{"enabled": false}}, 0,
			[]string{"ConfigMap", "ConfigMap", "Service"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rendered := renderChart(t, "helm/ragwatch", tc.values)
			var kinds []string
			deployments := 0
			for name, doc := range rendered {
				objs := decodeStrict(t, name, []byte(doc))
				deployments += checkObjects(t, name, objs)
				for _, o := range objs {
					switch o := o.(type) {
					case *corev1.ConfigMap:
						kinds = append(kinds, "ConfigMap")
						if s, ok := o.Data["containers.yaml"]; ok {
							var cs []corev1.Container
							js, err := yaml.YAMLToJSON([]byte(s))
							if err != nil {
								t.Fatal(err)
							}
							dec := json.NewDecoder(bytes.NewReader(js))
							dec.DisallowUnknownFields()
							if err := dec.Decode(&cs); err != nil || len(cs) != 1 || cs[0].Name != "ragwatch" {
								t.Fatalf("sidecar snippet does not decode into one container: %v %+v", err, cs)
							}
						}
					case *corev1.Service:
						kinds = append(kinds, "Service")
					case *appsv1.Deployment:
						kinds = append(kinds, "Deployment")
					case *serviceMonitor:
						kinds = append(kinds, "ServiceMonitor")
					}
				}
			}
			sort.Strings(kinds)
			if strings.Join(kinds, ",") != strings.Join(tc.kinds, ",") {
				t.Errorf("kinds = %v, want %v", kinds, tc.kinds)
			}
			if deployments != tc.deployments {
				t.Errorf("deployments = %d, want %d", deployments, tc.deployments)
			}
		})
	}
}

// TestNATSCredentialsFromSecrets: no example connects to NATS with a bare URL. A sidecar's
// config takes the app user's password from the environment, which a Secret fills in both the
// ragwatch and the app container; a worker logs in to the cluster with a user and a password
// file mounted from a Secret.
func TestNATSCredentialsFromSecrets(t *testing.T) {
	sets := map[string][]any{}
	for _, f := range []string{"kubernetes/ragwatch-sidecar.yaml", "kubernetes/ragwatch-worker.yaml"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sets[f] = decodeStrict(t, f, data)
	}
	for name, doc := range renderChart(t, "helm/ragwatch", map[string]any{"worker": map[string]any{"enabled": true}}) {
		sets["chart "+name] = decodeStrict(t, name, []byte(doc))
	}
	var configs []string
	for _, objs := range sets {
		for _, o := range objs {
			if cm, ok := o.(*corev1.ConfigMap); ok && cm.Data["ragwatch.yaml"] != "" {
				configs = append(configs, cm.Data["ragwatch.yaml"])
			}
		}
	}
	if len(configs) < 4 {
		t.Fatalf("found %d ragwatch configs, want the sidecar's and the worker's in both the manifests and the chart", len(configs))
	}
	embedded, external := 0, 0
	for _, c := range configs {
		cfg, err := config.Parse([]byte(c))
		if err != nil {
			t.Fatal(err)
		}
		n := cfg.NATS
		if n.IsEmbedded() {
			embedded++
			if n.Embedded.Users.App.PasswordEnv == "" && n.Embedded.Users.App.PasswordFile == "" {
				t.Errorf("sidecar config does not take the app's NATS password from a Secret:\n%s", c)
			}
			continue
		}
		external++
		if strings.Contains(n.URL.Reveal(), "@") || n.User == "" || n.PasswordFile == "" {
			t.Errorf("worker config connects without user and password file (or with them in the URL):\n%s", c)
		}
	}
	if embedded < 2 || external < 2 {
		t.Fatalf("embedded configs %d, external %d: want the sidecar and the worker of both examples", embedded, external)
	}
	for set, objs := range sets {
		for _, o := range objs {
			d, ok := o.(*appsv1.Deployment)
			if !ok {
				continue
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if strings.Contains(c.Image, "ragwatch") && c.Args[0] == "worker" {
					if !mountsSecret(d.Spec.Template.Spec, c) {
						t.Errorf("%s: worker %s mounts no Secret for its NATS password", set, d.Name)
					}
					continue
				}
				want := "RAGWATCH_NATS_APP_PASSWORD"
				if !strings.Contains(c.Image, "ragwatch") {
					want = "NATS_PASSWORD" // the app
				}
				if !envFromSecret(c, want) {
					t.Errorf("%s: %s/%s lacks %s from a Secret", set, d.Name, c.Name, want)
				}
			}
		}
	}
}

func envFromSecret(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return true
		}
	}
	return false
}

func mountsSecret(pod corev1.PodSpec, c corev1.Container) bool {
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return true
			}
		}
	}
	return false
}
