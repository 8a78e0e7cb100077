package config

import (
	"strings"
	"testing"
)

func TestLabelCalibrationConfig(t *testing.T) {
	c, err := Parse([]byte("scoring:\n  builtin:\n    calibration: {min_labels: 50, refit_every: 10}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := defaultLabelCalibration()
	want.MinLabels, want.RefitEvery = 50, 10
	if got := c.Scoring.Builtin.Calibration; got != want {
		t.Fatalf("calibration %+v, want %+v", got, want)
	}
	if !Default().Scoring.Builtin.Calibration.Enabled {
		t.Error("calibration from labels is off by default")
	}
	_, err = Parse([]byte("scoring:\n  builtin:\n    calibration:\n      min_labels: 5\n      folds: 1\n      max_pairs: 3\n      bucket: \"a.b\"\n      history: 65\n      max_series: 0\n"))
	if err == nil {
		t.Fatal("invalid calibration settings accepted")
	}
	for _, w := range []string{
		"line 4: `scoring.builtin.calibration.min_labels` must be at least 20 and twice folds, got 5",
		"line 5: `scoring.builtin.calibration.folds` must be in [2, 20], got 1",
		"line 6: `scoring.builtin.calibration.max_pairs` must be at least min_labels (5), got 3",
		"line 7: `scoring.builtin.calibration.bucket` must be a JetStream KV bucket name (letters, digits, _ and -), got \"a.b\"",
		"line 8: `scoring.builtin.calibration.history` must be in [1, 64] (JetStream's limit), got 65",
		"line 9: `scoring.builtin.calibration.max_series` must be positive, got 0",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}
