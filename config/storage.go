package config

import (
	"fmt"
	"strings"
)

// StorageCap is one JetStream stream or KV bucket ragwatch creates, with the config key of its
// byte cap.
type StorageCap struct {
	Name     string // stream or bucket name
	Key      string // config key of the cap
	MaxBytes int64
}

// StorageCaps lists the streams and KV buckets this config makes ragwatch create, each with its
// byte cap. The embedded server reserves every cap against nats.embedded.max_store when the
// stream is created, so their sum must fit it (CheckStorage); `ragwatch worker` creates a subset.
func (c *Config) StorageCaps() []StorageCap {
	q := c.Scoring.Queue
	caps := []StorageCap{
		{q.Stream, "scoring.queue.max_bytes", q.MaxBytes},
		{q.DeadLetterStream, "scoring.queue.dead_letter_max_bytes", q.DeadLetterMaxBytes},
	}
	if c.Feedback.Bucket != "" {
		caps = append(caps, StorageCap{"KV_" + c.Feedback.Bucket, "feedback.max_bytes", c.Feedback.MaxBytes})
	}
	if c.Alerting.StateBucket != "" {
		caps = append(caps, StorageCap{"KV_" + c.Alerting.StateBucket, "alerting.state_max_bytes", c.Alerting.StateMaxBytes})
	}
	if lc := c.Scoring.Builtin.Calibration; lc.Enabled {
		caps = append(caps, StorageCap{"KV_" + lc.Bucket, "scoring.builtin.calibration.max_bytes", lc.MaxBytes})
	}
	if c.Export.Enabled && c.Export.Bucket != "" {
		caps = append(caps, StorageCap{"KV_" + c.Export.Bucket, "export.bucket_max_bytes", c.Export.BucketMaxBytes})
	}
	if c.Golden.File != "" {
		caps = append(caps, StorageCap{"KV_" + c.Golden.Bucket, "golden.max_bytes", c.Golden.MaxBytes})
	}
	if n := c.NATS.Consume; n.Mode == NATSModeJetStream {
		if n.CreateStream {
			caps = append(caps, StorageCap{n.Stream, "nats.consume.stream_max_bytes", n.StreamMaxBytes})
		}
		caps = append(caps, StorageCap{"KV_" + n.DedupBucket, "nats.consume.dedup_max_bytes", n.DedupMaxBytes})
	}
	return caps
}

// CheckStorage checks that the caps of the streams and buckets ragwatch creates fit the embedded
// server's JetStream store: beyond it, the server refuses to create the last stream at start.
func CheckStorage(c *Config) error {
	if !c.NATS.IsEmbedded() || c.NATS.Embedded.MaxStore <= 0 {
		return nil // an external cluster has its own limits; max_store <= 0 is reported by NATS.Validate
	}
	var sum int64
	var keys []string
	for _, sc := range c.StorageCaps() {
		sum += max(sc.MaxBytes, 0)
		keys = append(keys, fmt.Sprintf("`%s` %d", sc.Key, sc.MaxBytes))
	}
	if sum > c.NATS.Embedded.MaxStore {
		return Invalid("nats.embedded.max_store", "is %d bytes, less than the caps of the streams and buckets ragwatch creates (%d bytes: %s); raise it or lower them",
			c.NATS.Embedded.MaxStore, sum, strings.Join(keys, ", "))
	}
	return nil
}
