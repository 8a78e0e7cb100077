// Package httpin takes records, user feedback and human labels over HTTP: the handlers of
// POST /api/v1/records, /api/v1/feedback and /api/v1/labels, mounted on the API listener of
// internal/httpapi. It is collector/natsin's twin for HTTP: both decode with internal/record's
// codecs and count rejections in the same ragwatch_ingest_rejected_total reasons.
package httpin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/ragwatch/ragwatch/internal/httpapi"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
)

// The intake's paths.
const (
	RecordsPath  = "/api/v1/records"
	FeedbackPath = "/api/v1/feedback"
	LabelsPath   = "/api/v1/labels"
)

// DefaultMaxBodyBytes bounds a POST /api/v1/records body when Settings.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 8 << 20

// maxSmallBodyBytes bounds a POST /api/v1/feedback or /api/v1/labels body.
const maxSmallBodyBytes = 1 << 20

// Settings configures the intake. A nil consumer leaves its endpoint out.
type Settings struct {
	// Records receives records posted to /api/v1/records.
	Records record.Consumer
	// Feedback and Labels receive feedback and labels posted to /api/v1/feedback and
	// /api/v1/labels.
	Feedback record.FeedbackConsumer
	Labels   record.LabelConsumer
	// Metrics counts rejected posts with receiver "api". Required.
	Metrics *ingest.Metrics
	// MaxBodyBytes bounds a POST /api/v1/records body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxJSONDepth and MaxRecordsPerBatch bound a POST /api/v1/records body before it is
	// decoded; 0 takes record.DefaultMaxJSONDepth and record.DefaultMaxBatch.
	MaxJSONDepth, MaxRecordsPerBatch int
	Logger                           *slog.Logger
	// Now stamps records posted without a time.
	Now func() time.Time
}

// Intake holds the HTTP intake's handlers.
type Intake struct {
	set Settings
	log *slog.Logger
}

// Mounter is where the handlers go: *httpapi.Server, which puts /api/ routes behind its
// access, content-type and memory checks.
type Mounter interface {
	Mount(pattern string, h http.Handler)
}

var _ Mounter = (*httpapi.Server)(nil)

// New builds the intake.
func New(set Settings) (*Intake, error) {
	if set.Metrics == nil {
		return nil, errors.New("httpin: Metrics is required")
	}
	if set.Logger == nil {
		set.Logger = slog.New(slog.DiscardHandler)
	}
	if set.Now == nil {
		set.Now = time.Now
	}
	if set.MaxBodyBytes <= 0 {
		set.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return &Intake{set: set, log: set.Logger}, nil
}

// Mount adds the endpoints whose consumer is set. The records endpoint takes every method
// (it answers 405 itself, in its JSON error form); feedback and labels take POST only.
func (in *Intake) Mount(m Mounter) {
	if in.set.Records != nil {
		m.Mount(RecordsPath, in.recordsHandler())
	}
	if in.set.Feedback != nil {
		m.Mount("POST "+FeedbackPath, in.feedbackHandler())
	}
	if in.set.Labels != nil {
		m.Mount("POST "+LabelsPath, in.labelsHandler())
	}
}

// recordsAnswer is the 202 answer of POST /api/v1/records.
type recordsAnswer struct {
	Accepted int `json:"accepted"`
}

// recordsHandler serves POST /api/v1/records: one record or a JSON array of records. It
// answers 202 with the number accepted; 400 (405, 413, 415) with every problem; 429 with
// Retry-After when a stage downstream is overloaded; 500 when one failed. Errors use
// httpapi.WriteError's form ({"error", "errors"}).
func (in *Intake) recordsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const rcv = ingest.ReceiverAPI
		m := in.set.Metrics
		body, ok := httpapi.ReadJSONBody(w, r, in.set.MaxBodyBytes, m, rcv)
		if !ok {
			return
		}
		recs, err := record.DecodeJSONLimits(body, in.set.Now(), in.set.MaxJSONDepth, in.set.MaxRecordsPerBatch)
		if err != nil {
			reason, summary := ingest.DecodeReason(err), "invalid record"
			switch reason {
			case ingest.ReasonLimits:
				summary = "over a limit"
			case ingest.ReasonMalformed:
				summary = "malformed JSON"
			}
			m.Rejected(rcv, reason)
			httpapi.WriteError(w, http.StatusBadRequest, summary, strings.Split(err.Error(), "\n")...)
			return
		}
		// The request's context ends when the client goes away; the records are ours by now.
		ctx := context.WithoutCancel(r.Context())
		var errs []error
		accepted := 0
		for _, rec := range recs {
			if err := in.set.Records.ConsumeRecord(ctx, rec); err != nil {
				errs = append(errs, err)
				continue
			}
			accepted++
		}
		if err := errors.Join(errs...); err != nil {
			in.log.Warn("records from the API failed downstream", "failed", len(errs), "accepted", accepted, "err", err)
			if errors.Is(err, ingest.ErrOverloaded) {
				m.Rejected(rcv, ingest.ReasonOverloaded)
				w.Header().Set("Retry-After", "1")
				httpapi.WriteError(w, http.StatusTooManyRequests, fmt.Sprintf("overloaded: %d of %d records accepted, retry the rest later", accepted, len(recs)))
				return
			}
			httpapi.WriteError(w, http.StatusInternalServerError, fmt.Sprintf("%d of %d records accepted", accepted, len(recs)), strings.Split(err.Error(), "\n")...)
			return
		}
		httpapi.WriteJSON(w, http.StatusAccepted, recordsAnswer{Accepted: accepted})
	})
}

// response is the JSON body of POST /api/v1/feedback and /api/v1/labels.
type response struct {
	Accepted int      `json:"accepted,omitempty"`
	Error    string   `json:"error,omitempty"`
	Reasons  []string `json:"reasons,omitempty"`
}

// feedbackHandler serves POST /api/v1/feedback: one feedback or a JSON array of them
// (record.DecodeFeedback). It answers 202 with the number accepted, or 400 (405, 413, 415)
// with every reason.
func (in *Intake) feedbackHandler() http.Handler {
	return itemsHandler(in, "feedback", record.DecodeFeedback, in.set.Feedback.ConsumeFeedback)
}

// labelsHandler serves POST /api/v1/labels: one label or a JSON array of labels
// (record.DecodeLabels). It answers 202 with the number accepted, or 400 (405, 413, 415) with
// every reason.
func (in *Intake) labelsHandler() http.Handler {
	return itemsHandler(in, "labels", record.DecodeLabels, in.set.Labels.ConsumeLabel)
}

// itemsHandler is the POST endpoint of one kind of item (what: "feedback", "labels"): method
// and content type checks, the body limit, decoding, and the answer. An item that passed
// validation is accepted even when a consumer downstream fails (it is logged): the join has
// recorded it by then.
func itemsHandler[T any](in *Intake, what string, decode func([]byte) ([]T, error), consume func(context.Context, T) error) http.Handler {
	reject := func(w http.ResponseWriter, code int, reason, msg string, reasons []string) {
		in.set.Metrics.Rejected(ingest.ReceiverAPI, reason)
		writeResponse(w, code, response{Error: msg, Reasons: reasons})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeResponse(w, http.StatusMethodNotAllowed, response{Error: "method not allowed; use POST"})
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "" {
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || mt != "application/json" {
				reject(w, http.StatusUnsupportedMediaType, ingest.ReasonContentType, "Content-Type must be application/json", nil)
				return
			}
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSmallBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				reject(w, http.StatusRequestEntityTooLarge, ingest.ReasonTooLarge, "body larger than 1 MiB", nil)
				return
			}
			reject(w, http.StatusBadRequest, ingest.ReasonMalformed, "read body: "+err.Error(), nil)
			return
		}
		items, err := decode(body)
		if err != nil {
			reject(w, http.StatusBadRequest, ingest.DecodeReason(err), "invalid "+what, record.Problems(err))
			return
		}
		for _, it := range items {
			if err := consume(r.Context(), it); err != nil {
				in.log.Warn(what+" consumer failed", "err", err)
			}
		}
		writeResponse(w, http.StatusAccepted, response{Accepted: len(items)})
	})
}

// writeResponse answers like httpapi.WriteJSON, but with HTML escaping on: the form these two
// endpoints have always answered in.
func writeResponse(w http.ResponseWriter, code int, v response) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
