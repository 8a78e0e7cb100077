// Package diagnosis keeps, per service and variant, the windows of weighted statistics that
// alerts/diagnose's patterns read, diagnoses them on the alert engine's evaluation, exports
// ragwatch_diagnosis and answers which diagnosis an alert carries. alerts/diagnose is the pure
// pattern math; this package holds the state, the clock-driven windows and the gauge.
package diagnosis
