package main

import (
	"math"

	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
)

// fitOptions configure one logistic fit.
type fitOptions struct {
	lambda  float64 // L2 penalty on the standardised weights (never on the bias)
	noBias  bool    // fit without intercept (the pairwise model must be antisymmetric)
	weights []float64
}

// fitLogistic fits a logistic regression of y on the rows of x by Newton's method (iteratively
// reweighted least squares) with an L2 penalty: deterministic, exact to float rounding, and
// fast for the few dozen features here. Features are standardised by their training mean and
// standard deviation (a constant feature gets scale 1 and, penalised, weight 0).
func fitLogistic(x [][]float64, y []bool, o fitOptions) builtin.Logistic {
	d := len(x[0])
	m := builtin.Logistic{Mean: make([]float64, d), Scale: make([]float64, d), Weights: make([]float64, d)}
	n := float64(len(x))
	if o.noBias {
		// An antisymmetric model standardises by scale only: f(b) − f(a) has mean 0 by design.
		for j := range d {
			var ss float64
			for _, r := range x {
				ss += r[j] * r[j]
			}
			m.Scale[j] = math.Sqrt(ss / n)
		}
	} else {
		for j := range d {
			var s float64
			for _, r := range x {
				s += r[j]
			}
			m.Mean[j] = s / n
			var ss float64
			for _, r := range x {
				ss += (r[j] - m.Mean[j]) * (r[j] - m.Mean[j])
			}
			m.Scale[j] = math.Sqrt(ss / n)
		}
	}
	for j := range d {
		if m.Scale[j] < 1e-9 {
			m.Scale[j] = 1
		}
	}
	// Parameters: d weights, then the bias (when fitted).
	p := d
	if !o.noBias {
		p++
	}
	beta := make([]float64, p)
	z := make([]float64, p)
	for iter := 0; iter < 100; iter++ {
		grad := make([]float64, p)
		hess := make([][]float64, p)
		for k := range hess {
			hess[k] = make([]float64, p)
		}
		for i, r := range x {
			for j := range d {
				z[j] = (r[j] - m.Mean[j]) / m.Scale[j]
			}
			if !o.noBias {
				z[d] = 1
			}
			eta := 0.0
			for k := range p {
				eta += beta[k] * z[k]
			}
			mu := 1 / (1 + math.Exp(-eta))
			w := 1.0
			if o.weights != nil {
				w = o.weights[i]
			}
			t := 0.0
			if y[i] {
				t = 1
			}
			for k := range p {
				grad[k] += w * (t - mu) * z[k]
				for l := range p {
					hess[k][l] += w * mu * (1 - mu) * z[k] * z[l]
				}
			}
		}
		for k := range d {
			grad[k] -= o.lambda * beta[k]
			hess[k][k] += o.lambda
		}
		if !o.noBias {
			hess[d][d] += 1e-9 // keeps a separable bias direction solvable
		}
		step := solve(hess, grad)
		done := true
		for k := range p {
			beta[k] += step[k]
			if math.Abs(step[k]) > 1e-10 {
				done = false
			}
		}
		if done {
			break
		}
	}
	copy(m.Weights, beta[:d])
	if !o.noBias {
		m.Bias = beta[d]
	}
	return m
}

// solve solves a·s = b for symmetric positive definite a by Gaussian elimination with partial
// pivoting (a and b are consumed).
func solve(a [][]float64, b []float64) []float64 {
	n := len(b)
	for c := range n {
		piv := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[piv][c]) {
				piv = r
			}
		}
		a[c], a[piv] = a[piv], a[c]
		b[c], b[piv] = b[piv], b[c]
		if a[c][c] == 0 {
			continue
		}
		for r := c + 1; r < n; r++ {
			f := a[r][c] / a[c][c]
			for k := c; k < n; k++ {
				a[r][k] -= f * a[c][k]
			}
			b[r] -= f * b[c]
		}
	}
	s := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		v := b[r]
		for k := r + 1; k < n; k++ {
			v -= a[r][k] * s[k]
		}
		if a[r][r] != 0 {
			s[r] = v / a[r][r]
		}
	}
	return s
}

// shiftBias moves m's bias so that probability 0.5 falls where m gave p (0 < p < 1): the
// decision threshold chosen on out-of-fold predictions becomes the model's own 0.5.
func shiftBias(m builtin.Logistic, p float64) builtin.Logistic {
	m.Bias -= math.Log(p / (1 - p))
	return m
}
