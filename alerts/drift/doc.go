// Package drift measures how far a signal's distribution over the current window has moved from
// a reference: population stability index (PSI), Kolmogorov–Smirnov distance and
// Jensen–Shannon divergence, all on fixed bins so that window state stays bounded.
package drift
