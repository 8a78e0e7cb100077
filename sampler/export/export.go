// Package export keeps the recent records of live traffic with their scores, redacted, and
// serves a stratified evaluation set of them at GET /api/v1/export (`ragwatch export`): records
// in the form `ragwatch eval` reads, stratified by service, variant and score band, each
// carrying the weight that makes the set stand for the traffic.
package export

import (
	"cmp"
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// Limits of the API.
const (
	DefaultSize = 500
	MaxSize     = 100000
)

// Score bands, the third part of a stratum: the mean of the record's judged scores.
const (
	BandLow      = "low"      // below 0.5
	BandMid      = "mid"      // 0.5 to 0.8
	BandHigh     = "high"     // 0.8 and above
	BandUnscored = "unscored" // not sampled for judging (or its scores have not come back)
)

// ReasonExport is the Sampling.Reason of an exported record; its Probability is the inverse of
// the weight the record carries in the set.
const ReasonExport = "export"

// Options configures a Store.
type Options struct {
	MaxRecords int   // records kept; <= 0 gives 2000
	MaxBytes   int64 // approximate bytes of content kept; <= 0 gives 32 MiB
	// Redact filters every text of a record when it is exported (the process's redactor); nil
	// keeps text as it is.
	Redact func(string) string
}

type item struct {
	rec    record.Record // a shallow copy: stages treat records as read-only
	scores map[string]float64
	size   int64
	elem   *list.Element
	seq    uint64 // arrival order (a record seen again is newest again)
	slot   int    // its key in the bucket, "r.<slot>", in [0, max_records): kept when seen again
}

// Store keeps the most recent records (bounded by count and bytes) and the scores that come
// back for them. It is a record.Consumer and a score.Consumer; safe for concurrent use.
type Store struct {
	o Options

	mu    sync.Mutex // guards the fields below
	order *list.List // of *item, oldest first
	byKey map[string]*item
	bytes int64
	seq   uint64 // the last record's sequence number
	// The bucket's slots: those freed by evicted records, and the first never used.
	free     []int
	nextSlot int

	// With Persist: the bucket's writer, and the records changed since its last flush.
	p       *persister
	dirty   map[*item]struct{}
	loading int // > 0 while load replays the bucket: slots are counted after
}

var (
	_ record.Consumer      = (*Store)(nil)
	_ score.Consumer       = (*Store)(nil)
	_ record.LabelConsumer = (*Store)(nil)
)

// New returns an empty store.
func New(o Options) *Store {
	if o.MaxRecords <= 0 {
		o.MaxRecords = 2000
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 32 << 20
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	return &Store{o: o, order: list.New(), byKey: map[string]*item{}}
}

// ConsumeRecord implements record.Consumer: it keeps r (a shallow copy; the text is redacted
// when it is exported, so the hot path pays no redaction), evicting the oldest records past the
// bounds. O(1).
func (s *Store) ConsumeRecord(_ context.Context, r *record.Record) error {
	if r.Query == "" && r.Answer == "" {
		return nil // nothing an evaluation could score
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.insert(r, 0, nil, -1)
	return nil
}

// insert keeps a shallow copy of r as the newest record, with its sequence number seq (0: the
// next one), scores and bucket slot (-1: its old copy's, or a free one), evicting the oldest
// past the bounds, and marks it for the bucket. Called with mu held.
func (s *Store) insert(r *record.Record, seq uint64, scores map[string]float64, slot int) {
	it := &item{rec: *r, size: size(r), scores: scores}
	it.rec.Sampling = nil
	key := r.Key()
	if old, ok := s.byKey[key]; ok { // a record seen again replaces the old copy, scores and labels kept
		it.scores = old.scores
		if old.rec.Labels != nil { // they hold the copy's own and those posted since: theirs win
			it.rec.Labels = record.MergeLabels(r.Labels, old.rec.Labels)
			it.size = size(&it.rec)
		}
		if slot < 0 {
			slot = old.slot
			old.slot = -1 // not freed: the new copy takes it
		}
		s.remove(old)
	}
	for s.order.Len() >= s.o.MaxRecords {
		s.remove(s.order.Front().Value.(*item))
	}
	if seq == 0 {
		seq = s.seq + 1
	}
	s.seq = max(s.seq, seq)
	if slot < 0 && s.loading == 0 { // while loading, load gives it one after
		slot = s.takeSlot()
	}
	it.seq, it.slot = seq, slot
	it.elem = s.order.PushBack(it)
	s.byKey[key] = it
	s.bytes += it.size
	s.changed(it)
	for s.bytes > s.o.MaxBytes && s.order.Len() > 1 {
		s.remove(s.order.Front().Value.(*item))
	}
}

// takeSlot returns a free bucket slot. Called with mu held, with fewer than max_records
// records kept.
func (s *Store) takeSlot() int {
	if n := len(s.free); n > 0 {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		return slot
	}
	s.nextSlot++
	return s.nextSlot - 1
}

// changed marks it for the bucket's next flush. Called with mu held.
func (s *Store) changed(it *item) {
	if s.dirty != nil {
		s.dirty[it] = struct{}{}
	}
}

// remove drops it from the order and the index. Called with mu held.
func (s *Store) remove(it *item) {
	s.order.Remove(it.elem)
	if s.byKey[it.rec.Key()] == it {
		delete(s.byKey, it.rec.Key())
	}
	s.bytes -= it.size
	delete(s.dirty, it)
	if it.slot >= 0 && s.loading == 0 {
		s.free = append(s.free, it.slot)
	}
}

// ConsumeScores implements score.Consumer: results join the record they score, when kept.
func (s *Store) ConsumeScores(_ context.Context, results []score.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, res := range results {
		key := res.TraceID
		if res.SpanID != "" {
			key += "/" + res.SpanID
		}
		it, ok := s.byKey[key]
		if !ok || math.IsNaN(res.Value) {
			continue
		}
		if it.scores == nil {
			it.scores = map[string]float64{}
		}
		it.scores[res.Metric] = res.Value
		s.changed(it)
	}
	return nil
}

// ConsumeLabel implements record.LabelConsumer: a label that arrived after its record joins
// the record's labels, when the record is kept, so the exported record carries every label
// posted for it, before or after it arrived (record.MergeLabels: later values win). Labels for
// records no longer kept are ignored here (the join counts every label).
func (s *Store) ConsumeLabel(_ context.Context, l record.Label) error {
	key := l.TraceID
	if l.SpanID != "" {
		key += "/" + l.SpanID
	}
	lc := l
	lc.TraceID, lc.SpanID, lc.Service, lc.Variant = "", "", "", ""
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.byKey[key]
	if !ok {
		return nil
	}
	it.rec.Labels = record.MergeLabels(it.rec.Labels, &lc)
	s.bytes -= it.size
	it.size = size(&it.rec)
	s.bytes += it.size
	s.changed(it)
	return nil
}

// Ranking returns what the retrieval metrics need of the kept record traceID/spanID — its
// document ids in order, ids, variant, turn and upstream probability, no content — or nil.
// The sampling stage scores late relevance labels with it when its own rankings no longer hold
// the record (sampler.Stage.RankingsFrom): after a restart, the records read back.
func (s *Store) Ranking(traceID, spanID string) *record.Record {
	key := traceID
	if spanID != "" {
		key += "/" + spanID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.byKey[key]
	if !ok {
		return nil
	}
	r := &record.Record{TraceID: traceID, SpanID: spanID, Service: it.rec.Service, Variant: it.rec.Variant,
		Turn: it.rec.Turn, UpstreamProbability: it.rec.UpstreamProbability, Documents: make([]record.Document, len(it.rec.Documents))}
	for i, d := range it.rec.Documents {
		r.Documents[i].ID = d.ID
	}
	return r
}

// redacted copies r with every text filtered: query, answer, documents, citations, history,
// reference, feedback comment, label reference and attribute values, and the user and
// session ids, which apps often fill with an e-mail address or a phone number.
func (s *Store) redacted(r *record.Record) record.Record {
	red := s.o.Redact
	c := *r
	c.Sampling = nil
	c.Query, c.Answer, c.Reference = red(r.Query), red(r.Answer), red(r.Reference)
	c.UserID, c.SessionID = red(r.UserID), red(r.SessionID)
	c.Documents = make([]record.Document, len(r.Documents))
	for i, d := range r.Documents {
		c.Documents[i] = record.Document{ID: d.ID, Score: d.Score, Content: red(d.Content)}
	}
	c.Citations = make([]record.Citation, len(r.Citations))
	for i, ct := range r.Citations {
		c.Citations[i] = record.Citation{Text: red(ct.Text), DocumentIDs: slices.Clone(ct.DocumentIDs)}
	}
	if r.History != nil {
		c.History = make([]record.Message, len(r.History))
		for i, m := range r.History {
			c.History[i] = record.Message{Role: m.Role, Content: red(m.Content)}
		}
	}
	if r.Attributes != nil {
		c.Attributes = make(map[string]string, len(r.Attributes))
		for k, v := range r.Attributes {
			c.Attributes[k] = red(v)
		}
	}
	if r.Feedback != nil {
		fb := *r.Feedback
		fb.Comment = red(fb.Comment)
		c.Feedback = &fb
	}
	if r.Labels != nil {
		l := *r.Labels
		l.Reference = red(l.Reference)
		c.Labels = &l
	}
	return c
}

func size(r *record.Record) int64 {
	n := len(r.Query) + len(r.Answer) + len(r.Reference) + 256
	for _, d := range r.Documents {
		n += len(d.ID) + len(d.Content) + 64
	}
	for _, c := range r.Citations {
		n += len(c.Text) + 32*len(c.DocumentIDs)
	}
	for _, m := range r.History {
		n += len(m.Content) + 32
	}
	for k, v := range r.Attributes {
		n += len(k) + len(v) + 32
	}
	if l := r.Labels; l != nil {
		n += len(l.Reference) + len(l.Labeler) + 32*(len(l.Values)+len(l.Relevance)) + 64
	}
	return int64(n + 32*len(r.Relevance))
}

// Line is one exported record: the record as `ragwatch eval` reads it (docs/record.md), its
// Sampling holding the export weight (probability = 1/weight, reason "export"), plus its live
// scores and stratum, which eval ignores.
type Line struct {
	record.Record
	Scores  map[string]float64 `json:"scores,omitempty"`
	Stratum string             `json:"stratum"`
	Weight  float64            `json:"weight"`
}

// Band is a record's score band: the mean of its judged scores (retrieval metrics, computed on
// every record with relevance labels, say nothing of the answer and are left out); unscored
// when no judge scored it.
func Band(scores map[string]float64) string {
	sum, n := 0.0, 0
	for m, v := range scores {
		if !config.IsRetrievalMetric(m) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return BandUnscored
	}
	switch mean := sum / float64(n); {
	case mean < 0.5:
		return BandLow
	case mean < 0.8:
		return BandMid
	}
	return BandHigh
}

// Stratum names a record's stratum: service/variant/band.
func Stratum(r *record.Record, scores map[string]float64) string {
	return r.Service + "/" + r.Variant + "/" + Band(scores)
}

// Select returns up to size records of those kept since since (zero: all), stratified by
// service, variant and score band: each stratum gets a share of size proportional to its
// records, at least one when size allows, the remainder going to the largest fractional
// shares. Within a stratum the records are chosen by a hash of their key, so the same traffic
// gives the same set. Each record's weight is its upstream weight times the stratum's records
// over those chosen from it: the weighted set stands for the traffic the store saw. Lines come
// in stratum order, then by key.
func (s *Store) Select(size int, since time.Time) []Line {
	strata := map[string][]Line{}
	s.mu.Lock()
	for e := s.order.Front(); e != nil; e = e.Next() {
		it := e.Value.(*item)
		if !since.IsZero() && it.rec.Time.Before(since) {
			continue
		}
		l := Line{Record: it.rec, Scores: cloneScores(it.scores)}
		l.Stratum = Stratum(&l.Record, l.Scores)
		strata[l.Stratum] = append(strata[l.Stratum], l)
	}
	s.mu.Unlock()
	names := make([]string, 0, len(strata))
	total := 0
	for n, ls := range strata {
		names = append(names, n)
		total += len(ls)
	}
	slices.Sort(names)
	quota := allocate(names, strata, total, size)
	var out []Line
	for _, n := range names {
		ls, k := strata[n], quota[n]
		if k == 0 {
			continue
		}
		slices.SortFunc(ls, func(a, b Line) int { return cmp.Compare(hash(a.Key()), hash(b.Key())) })
		chosen := ls[:k]
		slices.SortFunc(chosen, func(a, b Line) int { return cmp.Compare(a.Key(), b.Key()) })
		factor := float64(len(ls)) / float64(k)
		for _, l := range chosen {
			l.Record = s.redacted(&l.Record) // every text leaves the process redacted
			l.Weight = l.UpstreamWeight() * factor
			l.Sampling = &record.Sampling{Probability: 1 / l.Weight, Reason: ReasonExport}
			out = append(out, l)
		}
	}
	return out
}

// allocate shares size among strata proportionally (largest remainders), at least one each
// when size covers every stratum, never more than a stratum holds.
func allocate(names []string, strata map[string][]Line, total, size int) map[string]int {
	q := make(map[string]int, len(names))
	if size >= total {
		for _, n := range names {
			q[n] = len(strata[n])
		}
		return q
	}
	type frac struct {
		name string
		f    float64
	}
	var fr []frac
	used := 0
	for _, n := range names {
		exact := float64(size) * float64(len(strata[n])) / float64(total)
		k := int(exact)
		if k == 0 && size >= len(names) {
			k = 1
		}
		k = min(k, len(strata[n]))
		q[n] = k
		used += k
		fr = append(fr, frac{n, exact - math.Floor(exact)})
	}
	slices.SortStableFunc(fr, func(a, b frac) int { return cmp.Compare(b.f, a.f) })
	for used > size { // the minimum of one overshot: take back from the largest quotas
		big := names[0]
		for _, n := range names {
			if q[n] > q[big] {
				big = n
			}
		}
		q[big]--
		used--
	}
	for progress := true; used < size && progress; { // largest remainders first, then round again
		progress = false
		for _, f := range fr {
			if used < size && q[f.name] < len(strata[f.name]) {
				q[f.name]++
				used++
				progress = true
			}
		}
	}
	return q
}

func cloneScores(m map[string]float64) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func hash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// Handler serves GET /api/v1/export?size=500&since=24h as JSON lines (application/x-ndjson),
// one Line per record. since is a duration back from now or an RFC 3339 time; bad parameters
// get 400 with {"error": "..."}.
func (s *Store) Handler(now func() time.Time) http.Handler {
	if now == nil {
		now = time.Now
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		size := DefaultSize
		if v := q.Get("size"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxSize {
				httpError(w, fmt.Sprintf("`size` must be an integer from 1 to %d, got %q", MaxSize, v))
				return
			}
			size = n
		}
		var since time.Time
		if v := q.Get("since"); v != "" {
			t, err := ParseSince(v, now())
			if err != nil {
				httpError(w, err.Error())
				return
			}
			since = t
		}
		lines := s.Select(size, since)
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		for i := range lines {
			if err := enc.Encode(&lines[i]); err != nil {
				return // the client went away
			}
		}
	})
}

// ParseSince reads a duration back from now ("24h") or an RFC 3339 time.
func ParseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("`since` must be a positive duration (24h) or an RFC 3339 time, got %q", v)
}

func httpError(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
