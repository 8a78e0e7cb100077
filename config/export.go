package config

import "github.com/ragwatch/ragwatch/internal/natsconn"

// Export configures the store of recent records behind GET /api/v1/export and `ragwatch
// export`: the live records (redacted) and their scores an evaluation set is drawn from. Off by
// default, since it keeps record content in memory.
type Export struct {
	Enabled    bool  `yaml:"enabled"`
	MaxRecords int   `yaml:"max_records"`
	MaxBytes   int64 `yaml:"max_bytes"`
	// Bucket is the JetStream KV bucket the kept records (redacted), their scores and labels
	// are written to, so a restart finds them; "" keeps them in memory only.
	Bucket string `yaml:"bucket"`
	// BucketMaxBytes caps Bucket (one key per kept record, at most max_records keys).
	BucketMaxBytes int64 `yaml:"bucket_max_bytes"`
}

func defaultExport() Export {
	return Export{MaxRecords: 2000, MaxBytes: 32 << 20, Bucket: "ragwatch_export", BucketMaxBytes: 64 << 20}
}

// Validate implements Validator.
func (e Export) Validate() error {
	var errs []error
	if e.MaxRecords <= 0 {
		errs = append(errs, Invalid("max_records", "must be positive, got %d", e.MaxRecords))
	}
	if e.MaxBytes <= 0 {
		errs = append(errs, Invalid("max_bytes", "must be positive, got %d", e.MaxBytes))
	}
	if e.Bucket != "" && e.BucketMaxBytes <= 0 {
		errs = append(errs, Invalid("bucket_max_bytes", "must be positive with a bucket, got %d", e.BucketMaxBytes))
	}
	if e.Bucket != "" && !natsconn.ValidName(e.Bucket) {
		errs = append(errs, Invalid("bucket", "must be a bucket name of letters, digits, '-' or '_', got %q", e.Bucket))
	}
	return joinErrs(errs)
}
