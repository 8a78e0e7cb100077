package labelcal

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/ragwatch/ragwatch/internal/httpapi"
)

// MapsResponse is the body of GET /api/v1/calibration: the newest version of every series.
type MapsResponse struct {
	Maps []MapState `json:"maps"`
}

// MapState is a series' newest map and whether scores are mapped with it now (applied and not
// reverted).
type MapState struct {
	Map
	InUse bool `json:"in_use"`
}

// SeriesRequest is the body of POST /api/v1/calibration/revert and /restore.
type SeriesRequest struct {
	Service string `json:"service"`
	Metric  string `json:"metric"`
}

// maxRequestBytes bounds a revert or restore body.
const maxRequestBytes = 4096

// Handler serves GET /api/v1/calibration.
func (l *Learner) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		maps := l.Maps()
		out := MapsResponse{Maps: make([]MapState, len(maps))}
		for i, m := range maps {
			out.Maps[i] = MapState{Map: m, InUse: m.Applied && !m.Reverted}
		}
		httpapi.WriteJSON(w, http.StatusOK, out)
	})
}

// RevertHandler serves POST /api/v1/calibration/revert: the series' scores pass unchanged
// from now on, in every process (the store carries the new version).
func (l *Learner) RevertHandler() http.Handler { return l.seriesHandler(l.Revert) }

// RestoreHandler serves POST /api/v1/calibration/restore: undoes a revert.
func (l *Learner) RestoreHandler() http.Handler { return l.seriesHandler(l.Restore) }

func (l *Learner) seriesHandler(do func(ctx context.Context, service, metric string) (Map, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		if err != nil {
			httpapi.WriteError(w, http.StatusRequestEntityTooLarge, "body is over the limit of 4096 bytes")
			return
		}
		var req SeriesRequest
		if err := json.Unmarshal(body, &req); err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, "body must be a JSON object {\"service\", \"metric\"}: "+err.Error())
			return
		}
		var problems []string
		if req.Service == "" {
			problems = append(problems, "service: required")
		}
		if req.Metric == "" {
			problems = append(problems, "metric: required")
		}
		if problems != nil {
			httpapi.WriteError(w, http.StatusBadRequest, "invalid request", problems...)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
		defer cancel()
		m, err := do(ctx, req.Service, req.Metric)
		switch {
		case errors.Is(err, ErrNoMap):
			httpapi.WriteError(w, http.StatusNotFound, err.Error())
		case err != nil:
			httpapi.WriteError(w, http.StatusServiceUnavailable, "the calibration store did not take the change; nothing changed: "+err.Error())
		default:
			httpapi.WriteJSON(w, http.StatusOK, MapState{Map: m, InUse: m.Applied && !m.Reverted})
		}
	})
}
