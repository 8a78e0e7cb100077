package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAgreementValidate(t *testing.T) {
	_, err := Parse([]byte("alerting:\n  agreement:\n    window: 0s\n    min_samples: 2000\n    max_series: 0\n"))
	if err == nil {
		t.Fatal("invalid agreement settings accepted")
	}
	for _, want := range []string{
		"line 3: `alerting.agreement.window` must be positive",
		"line 4: `alerting.agreement.min_samples` must not exceed max_pairs (1000)",
		"line 5: `alerting.agreement.max_series` must be positive, got 0",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	_, err = Parse([]byte("alerting:\n  agreement:\n    max_records: 16777217\n"))
	if want := "line 3: `alerting.agreement.max_records` must be at most 16777216, got 16777217"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
	if _, err := Parse([]byte("alerting:\n  agreement:\n    max_records: 16777216\n")); err != nil {
		t.Errorf("the bound itself: %v", err)
	}
	c, err := Parse([]byte("alerting:\n  agreement: {window: 1d, min_samples: 10}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Alerting.Agreement; a.MinSamples != 10 || a.MaxPairs != 1000 || a.Window != md(24*time.Hour) {
		t.Fatalf("agreement %+v", a)
	}
}

func TestExportConfig(t *testing.T) {
	c, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Export != (Export{MaxRecords: 2000, MaxBytes: 32 << 20, Bucket: "ragwatch_export", BucketMaxBytes: 64 << 20}) {
		t.Fatalf("export defaults %+v", c.Export)
	}
	for yaml, want := range map[string]string{
		"export: {enabled: true, max_records: 0}\n":                    "`export.max_records` must be positive, got 0",
		"export: {enabled: true, bucket_max_bytes: 0}\n":               "`export.bucket_max_bytes` must be positive with a bucket, got 0",
		"export: {enabled: true, bucket: \"a.b\"}\n":                   "`export.bucket` must be a bucket name",
		"export: {enabled: true, bucket: \"\", bucket_max_bytes: 0}\n": "",
	} {
		_, err = Parse([]byte(yaml))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: error %v, want %q", yaml, err, want)
		}
	}
	// The bucket's cap counts against the embedded store only when the store is on.
	on, err := Parse([]byte("export: {enabled: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(on.StorageCaps(), StorageCap{"KV_ragwatch_export", "export.bucket_max_bytes", 64 << 20}) ||
		slices.ContainsFunc(c.StorageCaps(), func(sc StorageCap) bool { return sc.Key == "export.bucket_max_bytes" }) {
		t.Fatalf("storage caps: on %v, off %v", on.StorageCaps(), c.StorageCaps())
	}
}
