package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ragwatch/ragwatch/internal/truncate"
)

// The JSON forms that come from outside — records (DecodeJSON), feedback (DecodeFeedback) and
// labels (DecodeLabels) — are decoded here, once, for every transport that carries them: the
// HTTP intake (collector/httpin) and the NATS intake (collector/natsin). Each decoder returns
// every problem, naming the array index; its errors tell three kinds apart for the intake
// counters: *LimitError (too deep or too many, before decoding), *MalformedError (not JSON of
// the expected shape), anything else (decodable but invalid).

// MalformedError is input that is not JSON of the expected shape: empty, not JSON, an empty
// array, trailing data, or (for feedback and labels) an unknown key. Receivers count it as
// reason "malformed"; a decodable but invalid value is "invalid".
type MalformedError struct {
	Msg string
	Err error // the decoder's error, if any
}

func (e *MalformedError) Error() string { return e.Msg }

// Unwrap returns the decoder's error.
func (e *MalformedError) Unwrap() error { return e.Err }

// IsMalformed reports whether err is (or wraps) a *MalformedError.
func IsMalformed(err error) bool {
	var me *MalformedError
	return errors.As(err, &me)
}

func malformed(msg string) error { return &MalformedError{Msg: msg} }

func invalidJSON(err error) error {
	return &MalformedError{Msg: "invalid JSON: " + err.Error(), Err: err}
}

// MaxCommentBytes bounds a feedback comment.
const MaxCommentBytes = 4096

// feedbackJSON is the JSON form of feedback on NATS (`ragwatch.feedback.>`) and on
// POST /api/v1/feedback: exactly one of Score (-1..1) or Thumbs ("up" = 1, "down" = -1). It
// exists only to decode and validate that form; DecodeFeedback turns it into Feedback.
type feedbackJSON struct {
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

// validate returns every problem with the feedback.
func (e *feedbackJSON) validate() error {
	var errs []error
	switch {
	case e.TraceID == "":
		errs = append(errs, errors.New("trace_id: is required"))
	case len(e.TraceID) > MaxIDLength:
		errs = append(errs, fmt.Errorf("trace_id: longer than %d bytes", MaxIDLength))
	}
	if len(e.SpanID) > MaxIDLength {
		errs = append(errs, fmt.Errorf("span_id: longer than %d bytes", MaxIDLength))
	}
	if len(e.Service) > MaxIDLength {
		errs = append(errs, fmt.Errorf("service: longer than %d bytes", MaxIDLength))
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

// feedback returns the Feedback; a zero Time stays zero (the join sets it on arrival).
func (e *feedbackJSON) feedback() Feedback {
	f := Feedback{TraceID: e.TraceID, SpanID: e.SpanID, Service: e.Service, Comment: e.Comment, Time: e.Time}
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

// DecodeFeedback decodes the JSON form of feedback (NATS `ragwatch.feedback.>`, POST
// /api/v1/feedback): one value or an array of them, strictly (unknown keys are errors),
// validating each. Errors name the array index.
func DecodeFeedback(data []byte) ([]Feedback, error) {
	evs, err := decodeOneOrMany[feedbackJSON](data)
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
	out := make([]Feedback, len(evs))
	for i := range evs {
		out[i] = evs[i].feedback()
	}
	return out, nil
}

// DecodeLabels decodes the JSON form of labels (NATS `ragwatch.labels.>`, POST
// /api/v1/labels): one Label or an array of them, strictly (unknown keys are errors),
// validating each: trace_id is required, plus Label.Validate. Errors name the array index.
func DecodeLabels(data []byte) ([]Label, error) {
	ls, err := decodeOneOrMany[Label](data)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i := range ls {
		var lerrs []error
		if ls[i].TraceID == "" {
			lerrs = append(lerrs, errors.New("trace_id: is required"))
		}
		if len(ls[i].Service) > MaxIDLength {
			lerrs = append(lerrs, fmt.Errorf("service: longer than %d bytes", MaxIDLength))
		}
		if err := ls[i].Validate(); err != nil {
			lerrs = append(lerrs, unjoin(err)...)
		}
		errs = append(errs, atIndex(i, len(ls), errors.Join(lerrs...)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ls, nil
}

// decodeOneOrMany decodes data, one JSON value of T or a non-empty array of them, strictly
// (unknown keys are errors) and within CheckJSON's default bounds.
func decodeOneOrMany[T any](data []byte) ([]T, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, malformed("empty body")
	}
	if err := CheckJSON(data, DefaultMaxJSONDepth, DefaultMaxBatch); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var vs []T
	if data[0] == '[' {
		if err := dec.Decode(&vs); err != nil {
			return nil, invalidJSON(err)
		}
		if len(vs) == 0 {
			return nil, malformed("empty array")
		}
	} else {
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, invalidJSON(err)
		}
		vs = []T{v}
	}
	if dec.More() {
		return nil, malformed("invalid JSON: trailing data after the value")
	}
	return vs, nil
}

// atIndex names the array index i on every problem in err when the array holds more than one
// value (n); nil stays nil.
func atIndex(i, n int, err error) error {
	if err == nil || n <= 1 {
		return err
	}
	var out []error
	for _, e := range unjoin(err) {
		out = append(out, fmt.Errorf("[%d].%s", i, e.Error()))
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

// Problems lists the problems of a decoder's error one per line, as the intakes answer them.
func Problems(err error) []string {
	var out []string
	for _, e := range unjoin(err) {
		out = append(out, e.Error())
	}
	return out
}
