package config

// Export configures the store of recent records behind GET /api/v1/export and `ragwatch
// export`: the live records (redacted) and their scores an evaluation set is drawn from. Off by
// default, since it keeps record content in memory.
type Export struct {
	Enabled    bool  `yaml:"enabled"`
	MaxRecords int   `yaml:"max_records"`
	MaxBytes   int64 `yaml:"max_bytes"`
}

func defaultExport() Export { return Export{MaxRecords: 2000, MaxBytes: 32 << 20} }

// Validate implements Validator.
func (e Export) Validate() error {
	var errs []error
	if e.MaxRecords <= 0 {
		errs = append(errs, Invalid("max_records", "must be positive, got %d", e.MaxRecords))
	}
	if e.MaxBytes <= 0 {
		errs = append(errs, Invalid("max_bytes", "must be positive, got %d", e.MaxBytes))
	}
	return joinErrs(errs)
}
