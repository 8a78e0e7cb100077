package builtin

import "math"

// Calibration is a monotone map from a raw score to a calibrated one in (0, 1) whose 0.5 is the
// scorer's decision: below it the answer is judged bad ("not faithful"). It is the logistic
// curve 1 / (1 + exp(-Slope·(x − Center))), strictly increasing for Slope > 0, so it keeps
// the ranking of answers and with it ROC AUC; it only moves the threshold to 0.5 and spreads
// the values around it. docs/scorer-quality.md explains how it is fitted.
type Calibration struct {
	// Center is the raw score mapped to 0.5: the decision threshold on the raw scale.
	Center float64
	// Slope is how fast the calibrated value leaves 0.5, fitted by maximum likelihood.
	Slope float64
}

// Apply maps a raw score.
func (c Calibration) Apply(x float64) float64 {
	return 1 / (1 + math.Exp(-c.Slope*(x-c.Center)))
}

// CalibrateFaithfulness is the faithfulness the scorer reports for a raw weakest-quarter claim
// support x (Faithfulness): FaithfulnessCalibration applied.
func CalibrateFaithfulness(x float64) float64 { return FaithfulnessCalibration.Apply(x) }
