package config

// Runtime tunes the Go runtime of the ragwatch process.
type Runtime struct {
	// GOGC is the garbage collector's target: a collection starts when the heap has grown by
	// this percentage of the live data since the last one. Go's own default is 100 (the heap
	// grows to about twice the live data); a sidecar is better served by less headroom for a
	// little more collector CPU, as Prometheus concluded when it moved to 50 (v2.53). The GOGC
	// environment variable, when set, wins over this key.
	GOGC int `yaml:"gogc"`
}

func defaultRuntime() Runtime { return Runtime{GOGC: 50} }

// Validate implements Validator.
func (r Runtime) Validate() error {
	if r.GOGC <= 0 {
		return Invalid("gogc", "must be positive (set the GOGC environment variable to \"off\" to disable the collector), got %d", r.GOGC)
	}
	return nil
}
