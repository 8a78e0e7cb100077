package engine

import (
	"encoding/json"
	"net/http"

	"github.com/ragwatch/ragwatch/alerts"
)

// AlertsResponse is the body of GET /api/v1/alerts.
type AlertsResponse struct {
	Alerts []alerts.Alert `json:"alerts"`
}

// Handler serves GET /api/v1/alerts: firing and recently resolved alerts with their facts and
// evidence. `?status=firing` or `?status=resolved` filters.
func (e *Engine) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		status := r.URL.Query().Get("status")
		if status != "" && status != alerts.StatusFiring && status != alerts.StatusResolved {
			http.Error(w, "status must be firing or resolved", http.StatusBadRequest)
			return
		}
		list := e.Alerts()
		if status != "" {
			kept := list[:0]
			for _, a := range list {
				if a.Status == status {
					kept = append(kept, a)
				}
			}
			list = kept
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(AlertsResponse{Alerts: list})
	})
}
