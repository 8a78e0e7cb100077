package join

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

// event is the JSON form of feedback on NATS (`ragwatch.feedback.>`) and on
// POST /api/v1/feedback: exactly one of Score (-1..1) or Thumbs ("up" = 1, "down" = -1). It
// exists only to decode and validate that form; DecodeEvents turns it into record.Feedback.
type event struct {
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

// validate returns every problem with the event.
func (e *event) validate() error {
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

// feedback returns the record form; a zero Time stays zero (the join sets it on arrival).
func (e *event) feedback() record.Feedback {
	f := record.Feedback{TraceID: e.TraceID, SpanID: e.SpanID, Service: e.Service, Comment: e.Comment, Time: e.Time}
	switch {
	case e.Score != nil:
		f.Score = *e.Score
	case e.Thumbs == "up":
		f.Score = 1
	case e.Thumbs == "down":
		f.Score = -1
	}
	return f
}

// DecodeEvents decodes the JSON form of feedback: one event or an array of them, strictly
// (unknown keys are errors), validating each. Errors name the array index.
func DecodeEvents(data []byte) ([]record.Feedback, error) {
	evs, err := decodeOneOrMany[event](data)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i := range evs {
		errs = append(errs, atIndex(i, len(evs), evs[i].validate()))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := make([]record.Feedback, len(evs))
	for i := range evs {
		out[i] = evs[i].feedback()
	}
	return out, nil
}

// decodeOneOrMany decodes data, one JSON value of T or a non-empty array of them, strictly
// (unknown keys are errors) and within record.CheckJSON's bounds. Its errors are those the
// HTTP and NATS intakes tell apart as bad JSON (isSyntax).
func decodeOneOrMany[T any](data []byte) ([]T, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, errors.New("empty body")
	}
	if err := record.CheckJSON(data, record.DefaultMaxJSONDepth, record.DefaultMaxBatch); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var vs []T
	if data[0] == '[' {
		if err := dec.Decode(&vs); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		if len(vs) == 0 {
			return nil, errors.New("empty array")
		}
	} else {
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		vs = []T{v}
	}
	if dec.More() {
		return nil, errors.New("invalid JSON: trailing data after the value")
	}
	return vs, nil
}

// atIndex names the array index i on every problem in err when the array holds more than one
// value (n); nil stays nil.
func atIndex(i, n int, err error) error {
	if err == nil || n <= 1 {
		return err
	}
	return prefixErrs(fmt.Sprintf("[%d].", i), err)
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
