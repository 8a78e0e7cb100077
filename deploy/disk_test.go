package deploy

import (
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/ragwatch/ragwatch/config"
)

// The embedded JetStream store lives on the sidecar's emptyDir; past its sizeLimit the kubelet
// evicts the whole pod, the app with it. So every stream and bucket ragwatch may create (the
// JetStream intake included) is capped, the caps fit the embedded server's max_store, and
// max_store fits the volume.
func TestDiskCapsFitTheVolume(t *testing.T) {
	check := func(t *testing.T, name string, objs []any) {
		t.Helper()
		var cfg *config.Config
		var sizeLimit int64
		for _, o := range objs {
			switch o := o.(type) {
			case *corev1.ConfigMap:
				if c, ok := o.Data["ragwatch.yaml"]; ok {
					var err error
					if cfg, err = config.Parse([]byte(c)); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
			case *appsv1.Deployment:
				sizeLimit = storeVolumeLimit(t, name, o)
			}
		}
		if cfg == nil || sizeLimit == 0 {
			t.Fatalf("%s: no ragwatch config or no sized store volume", name)
		}
		cfg.NATS.Consume.Mode = config.NATSModeJetStream // the worst case: every stream exists
		var sum int64
		for _, sc := range cfg.StorageCaps() {
			if sc.MaxBytes <= 0 {
				t.Errorf("%s: %s (`%s`) is not capped", name, sc.Name, sc.Key)
			}
			sum += sc.MaxBytes
		}
		maxStore := cfg.NATS.Embedded.MaxStore
		if sum > maxStore || maxStore > sizeLimit {
			t.Errorf("%s: caps %d MiB, nats.embedded.max_store %d MiB, emptyDir.sizeLimit %d MiB: want caps <= max_store <= sizeLimit",
				name, sum>>20, maxStore>>20, sizeLimit>>20)
		}
	}
	t.Run("kubernetes", func(t *testing.T) {
		f := "kubernetes/ragwatch-sidecar.yaml"
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		check(t, f, decodeStrict(t, f, data))
	})
	t.Run("helm", func(t *testing.T) {
		var objs []any
		for name, doc := range renderChart(t, "helm/ragwatch", nil) {
			objs = append(objs, decodeStrict(t, name, []byte(doc))...)
		}
		check(t, "helm/ragwatch", objs)
	})
}

// storeVolumeLimit is the sizeLimit of the emptyDir mounted at the ragwatch container's
// nats.store_dir (/var/lib/ragwatch in the examples).
func storeVolumeLimit(t *testing.T, name string, d *appsv1.Deployment) int64 {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "ragwatch" {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.MountPath != "/var/lib/ragwatch" {
				continue
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == m.Name {
					if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
						t.Fatalf("%s: volume %s has no emptyDir.sizeLimit", name, v.Name)
					}
					return v.EmptyDir.SizeLimit.Value()
				}
			}
		}
	}
	t.Fatalf("%s: Deployment %s mounts no volume at /var/lib/ragwatch for ragwatch", name, d.Name)
	return 0
}

// natsDrainBound is how long closing the NATS connection may take after --shutdown-timeout
// (natsconn.Conn.Close waits at most 10s for the drain).
const natsDrainBound = 10 * time.Second

// Every ragwatch container drains (--shutdown-timeout, 30s unless given, plus the NATS drain)
// within its pod's grace period (30s unless given): otherwise SIGKILL cuts the drain short and
// buffered samples and state writes are lost.
func TestShutdownFitsTheGracePeriod(t *testing.T) {
	check := func(t *testing.T, name string, objs []any) {
		t.Helper()
		for _, o := range objs {
			d, ok := o.(*appsv1.Deployment)
			if !ok {
				continue
			}
			grace := 30 * time.Second
			if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
				grace = time.Duration(*g) * time.Second
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if !strings.Contains(c.Image, "ragwatch") {
					continue
				}
				timeout := 30 * time.Second
				for i, a := range c.Args {
					if a == "--shutdown-timeout" && i+1 < len(c.Args) {
						var err error
						if timeout, err = time.ParseDuration(c.Args[i+1]); err != nil {
							t.Fatalf("%s: %s/%s --shutdown-timeout %q: %v", name, d.Name, c.Name, c.Args[i+1], err)
						}
					}
				}
				if timeout+natsDrainBound > grace {
					t.Errorf("%s: %s/%s drains in up to %s + %s, more than the pod's grace period %s",
						name, d.Name, c.Name, timeout, natsDrainBound, grace)
				}
			}
		}
	}
	for _, f := range []string{"kubernetes/ragwatch-sidecar.yaml", "kubernetes/ragwatch-worker.yaml"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		check(t, f, decodeStrict(t, f, data))
	}
	for name, doc := range renderChart(t, "helm/ragwatch", map[string]any{"worker": map[string]any{"enabled": true}}) {
		check(t, name, decodeStrict(t, name, []byte(doc)))
	}
}
