package join

import (
	"errors"
	"fmt"
	"maps"
	"net/http"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
)

// mergeLabels merges labels that waited for their record (in arrival order) onto the record's
// own labels, if any, into a new Label: later values per metric win, relevance maps merge
// (later grades per document win), the last non-empty reference and labeler win, and the time
// is the latest. The ids are left empty: on a record, the record says whose labels they are.
func mergeLabels(base *record.Label, ps []pending) *record.Label {
	out := &record.Label{}
	add := func(l *record.Label) {
		if len(l.Values) > 0 {
			if out.Values == nil {
				out.Values = make(map[string]float64, len(l.Values))
			}
			maps.Copy(out.Values, l.Values)
		}
		if len(l.Relevance) > 0 {
			if out.Relevance == nil {
				out.Relevance = make(map[string]int, len(l.Relevance))
			}
			maps.Copy(out.Relevance, l.Relevance)
		}
		if l.Reference != "" {
			out.Reference = l.Reference
		}
		if l.Labeler != "" {
			out.Labeler = l.Labeler
		}
		if l.Time.After(out.Time) {
			out.Time = l.Time
		}
	}
	if base != nil {
		add(base)
	}
	for _, p := range ps {
		if p.Label != nil {
			add(p.Label)
		}
	}
	return out
}

// DecodeLabels decodes the JSON form of labels (NATS `ragwatch.labels.>`, POST
// /api/v1/labels): one record.Label or an array of them, strictly (unknown keys are errors),
// validating each: trace_id is required, plus record.Label.Validate. Errors name the array
// index.
func DecodeLabels(data []byte) ([]record.Label, error) {
	ls, err := decodeOneOrMany[record.Label](data)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i := range ls {
		var lerrs []error
		if ls[i].TraceID == "" {
			lerrs = append(lerrs, errors.New("trace_id: is required"))
		}
		if len(ls[i].Service) > record.MaxIDLength {
			lerrs = append(lerrs, fmt.Errorf("service: longer than %d bytes", record.MaxIDLength))
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

// LabelsHandler serves POST /api/v1/labels: one label or a JSON array of labels. It answers
// 202 with the number accepted, or 400 (413, 415) with every reason; rejects are counted in
// ragwatch_ingest_rejected_total{receiver="api"}. metrics may be nil.
func (j *Join) LabelsHandler(metrics *ingest.Metrics) http.Handler {
	return j.intakeHandler(metrics, "labels", func(r *http.Request, body []byte) (int, error) {
		ls, err := DecodeLabels(body)
		if err != nil {
			return 0, err
		}
		for _, l := range ls {
			if err := j.ConsumeLabel(r.Context(), l); err != nil {
				// Validation passed; a downstream consumer failed. The label is recorded.
				j.log.Warn("label consumer failed", "err", err)
			}
		}
		return len(ls), nil
	})
}
