package service

import (
	"fmt"

	"github.com/ragwatch/ragwatch/internal/httpapi"
	"github.com/ragwatch/ragwatch/sampler/labelcal"
	"github.com/ragwatch/ragwatch/sampler/worker"
)

// labelCalibration builds the learner of scoring.builtin.calibration: in `ragwatch run` it
// fits the pairs the judge agreement hands it and serves /api/v1/calibration; in both commands
// it loads the stored maps at start and watches the bucket, so every scoring worker applies the
// newest version.
func (b *builder) labelCalibration() (lifecycle, error) {
	c := b.cfg.Scoring.Builtin.Calibration
	if !c.Enabled {
		return lifecycle{}, nil
	}
	kv, err := b.NATS.VersionedKeyValue(b.ctx, c.Bucket, uint8(c.History), c.MaxBytes)
	if err != nil {
		return lifecycle{}, fmt.Errorf("build label calibration: %w", err)
	}
	b.NATS.Store().Watch("label_calibration", kvStream(c.Bucket))
	l, err := labelcal.NewLearner(labelcal.LearnerOptions{
		MinLabels: c.MinLabels, Folds: c.Folds, MaxPairs: c.MaxPairs, MaxSeries: c.MaxSeries, RefitEvery: c.RefitEvery,
		Store: &labelcal.Store{KV: kv}, Registerer: b.Registry, Now: b.o.now, Logger: b.logger("labelcal"),
	})
	if err != nil {
		return lifecycle{}, fmt.Errorf("build label calibration: %w", err)
	}
	b.Calibration = l
	return lifecycle{start: l.Start, shutdown: l.Shutdown}, nil
}

// calibrator is what the scoring workers map their results with (nil when calibration is off).
func (b *builder) calibrator() worker.Calibrator {
	if b.Calibration == nil {
		return nil
	}
	return b.Calibration
}

// mountCalibration serves the maps, and reverting or restoring one, behind the API's access
// check (docs/scorer-quality.md#calibration-from-your-labels).
func (b *builder) mountCalibration(srv *httpapi.Server) {
	if b.Calibration == nil {
		return
	}
	srv.Mount("GET /api/v1/calibration", b.Calibration.Handler())
	srv.Mount("POST /api/v1/calibration/revert", b.Calibration.RevertHandler())
	srv.Mount("POST /api/v1/calibration/restore", b.Calibration.RestoreHandler())
}
