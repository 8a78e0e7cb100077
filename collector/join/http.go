package join

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
)

// MaxBodyBytes bounds a POST /api/v1/feedback or /api/v1/labels body.
const MaxBodyBytes = 1 << 20

// Response is the JSON body of POST /api/v1/feedback and /api/v1/labels.
type Response struct {
	Accepted int      `json:"accepted,omitempty"`
	Error    string   `json:"error,omitempty"`
	Reasons  []string `json:"reasons,omitempty"`
}

// Handler serves POST /api/v1/feedback: one event or a JSON array of events. It answers 202
// with the number accepted, or 400 (413, 415) with every reason; rejects are counted in
// ragwatch_ingest_rejected_total{receiver="api"}. metrics may be nil.
func (j *Join) Handler(metrics *ingest.Metrics) http.Handler {
	return j.intakeHandler(metrics, "feedback", func(r *http.Request, body []byte) (int, error) {
		evs, err := DecodeEvents(body)
		if err != nil {
			return 0, err
		}
		for _, f := range evs {
			if err := j.ConsumeFeedback(r.Context(), f); err != nil {
				// Validation passed; a downstream consumer failed. The feedback is recorded.
				j.log.Warn("feedback consumer failed", "err", err)
			}
		}
		return len(evs), nil
	})
}

// intakeHandler is the POST endpoint of one input (what: "feedback", "labels"): method and
// content type checks, the body limit, and the answer; consume decodes and hands on the body,
// returning how many items it accepted or every problem.
func (j *Join) intakeHandler(metrics *ingest.Metrics, what string, consume func(r *http.Request, body []byte) (int, error)) http.Handler {
	reject := func(w http.ResponseWriter, code int, reason, msg string, reasons []string) {
		if metrics != nil {
			metrics.Rejected(ingest.ReceiverAPI, reason)
		}
		writeJSON(w, code, Response{Error: msg, Reasons: reasons})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, http.StatusMethodNotAllowed, Response{Error: "method not allowed; use POST"})
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "" {
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || mt != "application/json" {
				reject(w, http.StatusUnsupportedMediaType, ingest.ReasonContentType, "Content-Type must be application/json", nil)
				return
			}
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				reject(w, http.StatusRequestEntityTooLarge, ingest.ReasonTooLarge, "body larger than 1 MiB", nil)
				return
			}
			reject(w, http.StatusBadRequest, ingest.ReasonMalformed, "read body: "+err.Error(), nil)
			return
		}
		n, err := consume(r, body)
		if err != nil {
			reason := ingest.ReasonInvalid
			switch {
			case record.IsLimit(err):
				reason = ingest.ReasonLimits
			case isSyntax(err):
				reason = ingest.ReasonMalformed
			}
			var reasons []string
			for _, e := range unjoin(err) {
				reasons = append(reasons, e.Error())
			}
			reject(w, http.StatusBadRequest, reason, "invalid "+what, reasons)
			return
		}
		writeJSON(w, http.StatusAccepted, Response{Accepted: n})
	})
}

// isSyntax tells a body that is not JSON (or not the expected shape) from a valid but wrong one.
func isSyntax(err error) bool {
	msg := err.Error()
	return len(msg) >= 12 && msg[:12] == "invalid JSON" || msg == "empty body" || msg == "empty array"
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
