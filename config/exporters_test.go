package config

import "testing"

func TestStatsdTagFormat(t *testing.T) {
	if got := Default().Exporters.Statsd.TagFormat; got != "datadog" {
		t.Errorf("default tag_format = %q, want datadog", got)
	}
	for _, f := range []string{"datadog", "influx", "graphite", "none"} {
		c, err := Parse([]byte("exporters:\n  statsd:\n    endpoint: 127.0.0.1:8125\n    tag_format: " + f + "\n"))
		if err != nil {
			t.Errorf("tag_format %s: %v", f, err)
			continue
		}
		if c.Exporters.Statsd.TagFormat != f || c.Exporters.Statsd.Prefix != "rag" {
			t.Errorf("tag_format %s: got %+v", f, c.Exporters.Statsd)
		}
	}
	_, err := Parse([]byte("exporters:\n  statsd:\n    endpoint: 127.0.0.1:8125\n    tag_format: xml\n"))
	want := "line 4: `exporters.statsd.tag_format` must be datadog, influx, graphite or none, got \"xml\""
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}
