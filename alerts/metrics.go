package alerts

// Metric names exported by the alert engine and the notifiers. The rule generator and the
// dashboard use these constants, so a rename cannot leave them behind.
const (
	// Per SLO and service, counters of what the window statistics are built from. For a
	// threshold SLO the value is the metric; for a burn-rate SLO it is 1 (good) or 0 (bad).
	MetricSamples              = "ragwatch_slo_samples_total"                 // N
	MetricWeight               = "ragwatch_slo_weight_total"                  // Σw (w = 1/p)
	MetricWeightSquared        = "ragwatch_slo_weight_squared_total"          // Σw²
	MetricWeightedValue        = "ragwatch_slo_weighted_value_total"          // Σw·x for x ≥ 0
	MetricWeightedValueNeg     = "ragwatch_slo_weighted_value_negative_total" // Σw·|x| for x < 0
	MetricWeightedValueSquared = "ragwatch_slo_weighted_value_squared_total"  // Σw·x²

	MetricSLOValue        = "ragwatch_slo_value"                   // gauge {slo,service}
	MetricSLOBound        = "ragwatch_slo_value_bound"             // gauge {slo,service,bound=lower|upper}
	MetricBudgetRemaining = "ragwatch_slo_error_budget_remaining"  // gauge {slo,service}
	MetricBurnRate        = "ragwatch_slo_burn_rate"               // gauge {slo,service,window}
	MetricAlertsFiring    = "ragwatch_alerts_firing"               // gauge {slo,severity}
	MetricDriftScore      = "ragwatch_drift_score"                 // gauge {detector,service}
	MetricChangeDetected  = "ragwatch_slo_change_detected"         // gauge {slo,service}, 0/1
	MetricChangeStatistic = "ragwatch_slo_change_statistic"        // gauge {slo,service}
	MetricDiagnosis       = "ragwatch_diagnosis"                   // gauge {service,pattern}, 0/1
	MetricInputsRejected  = "ragwatch_alert_inputs_rejected_total" // counter {reason}
	MetricStateSaves      = "ragwatch_alert_state_saves_total"     // counter {outcome}
	MetricNotifications   = "ragwatch_notifications_total"         // counter {notifier,outcome}
	MetricNotifyRetries   = "ragwatch_notification_retries_total"  // counter {notifier}
)
