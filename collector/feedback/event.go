package feedback

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// Event is user feedback as it arrives on NATS (`ragwatch.feedback.>`) and on
// POST /api/v1/feedback: exactly one of Score (-1..1) or Thumbs ("up" = 1, "down" = -1).
type Event struct {
	TraceID string   `json:"trace_id"`
	SpanID  string   `json:"span_id,omitempty"` // optional: the turn, when a trace holds several
	Score   *float64 `json:"score,omitempty"`
	Thumbs  string   `json:"thumbs,omitempty"`
	Comment string   `json:"comment,omitempty"`
	// Time is when the user gave the feedback; absent means when ragwatch received it.
	Time time.Time `json:"time,omitzero"`
	// Service is an optional hint, used only when the record never arrives (orphaned feedback).
	Service string `json:"service,omitempty"`
}

// MaxCommentBytes bounds a feedback comment.
const MaxCommentBytes = 4096

// Validate returns every problem with the event.
func (e *Event) Validate() error {
	var errs []error
	switch {
	case e.TraceID == "":
		errs = append(errs, errors.New("trace_id: is required"))
	case len(e.TraceID) > record.MaxIDLength:
		errs = append(errs, fmt.Errorf("trace_id: longer than %d bytes", record.MaxIDLength))
	}
	if len(e.SpanID) > record.MaxIDLength {
		errs = append(errs, fmt.Errorf("span_id: longer than %d bytes", record.MaxIDLength))
	}
	if len(e.Service) > record.MaxIDLength {
		errs = append(errs, fmt.Errorf("service: longer than %d bytes", record.MaxIDLength))
	}
	switch {
	case e.Score == nil && e.Thumbs == "":
		errs = append(errs, errors.New("score or thumbs: one of them is required"))
	case e.Score != nil && e.Thumbs != "":
		errs = append(errs, errors.New("score and thumbs: give only one of them"))
	case e.Score != nil && (math.IsNaN(*e.Score) || *e.Score < -1 || *e.Score > 1):
		errs = append(errs, errors.New("score: must be between -1 and 1"))
	case e.Thumbs != "" && e.Thumbs != "up" && e.Thumbs != "down":
		errs = append(errs, fmt.Errorf("thumbs: must be up or down, got %q", truncate.Ellipsis(e.Thumbs, 16)))
	}
	if len(e.Comment) > MaxCommentBytes {
		errs = append(errs, fmt.Errorf("comment: longer than %d bytes", MaxCommentBytes))
	}
	return errors.Join(errs...)
}

// Feedback returns the record form; a zero Time becomes now.
func (e *Event) Feedback(now time.Time) record.Feedback {
	f := record.Feedback{Comment: e.Comment, Time: e.Time}
	switch {
	case e.Score != nil:
		f.Score = *e.Score
	case e.Thumbs == "up":
		f.Score = 1
	case e.Thumbs == "down":
		f.Score = -1
	}
	if f.Time.IsZero() {
		f.Time = now
	}
	return f
}

// DecodeEvents decodes one event or a JSON array of events, strictly (unknown keys are errors),
// and validates each. Errors name the array index.
func DecodeEvents(data []byte) ([]Event, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, errors.New("empty body")
	}
	if err := record.CheckJSON(data, record.DefaultMaxJSONDepth, record.DefaultMaxBatch); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var evs []Event
	if data[0] == '[' {
		if err := dec.Decode(&evs); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		if len(evs) == 0 {
			return nil, errors.New("empty array")
		}
	} else {
		var e Event
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		evs = []Event{e}
	}
	if dec.More() {
		return nil, errors.New("invalid JSON: trailing data after the value")
	}
	var errs []error
	for i := range evs {
		if err := evs[i].Validate(); err != nil {
			if len(evs) > 1 {
				err = prefixErrs(fmt.Sprintf("[%d].", i), err)
			}
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return evs, nil
}

func prefixErrs(prefix string, err error) error {
	var out []error
	for _, e := range unjoin(err) {
		out = append(out, errors.New(prefix+e.Error()))
	}
	return errors.Join(out...)
}

// unjoin flattens errors.Join trees into their leaves.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}
