// Package nli verifies claims with an HTTP NLI model server speaking the
// text-embeddings-inference /predict API (for example cross-encoder/nli-deberta-v3-base):
// faithfulness, citation_precision and citation_recall.
package nli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/text"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// Metrics the NLI scorer covers.
var Metrics = []string{score.Faithfulness, score.CitationPrecision, score.CitationRecall}

// DefaultThreshold is the entailment probability at which a premise supports a claim.
const DefaultThreshold = 0.7

// Config configures a Scorer.
type Config struct {
	URL        string // base URL of the model server; /predict is appended
	Threshold  float64
	Timeout    time.Duration // per request; default 10s
	MaxRetries int           // on 429/5xx/network; default 0
	BatchSize  int           // pairs per request; default 32
	MaxPairs   int           // pairs per metric and record; default 256
	HTTPClient *http.Client
	Metrics    []string // enabled metrics; empty enables all
	Now        func() time.Time
	Sleep      func(ctx context.Context, d time.Duration) error
	// Registerer receives ragwatch_nli_requests_total{outcome}; nil registers nothing.
	Registerer prometheus.Registerer
	// Redact filters every premise and hypothesis before it is sent, and the error text the
	// server sends back. nil applies every built-in detector of internal/redact
	// (llm.DefaultRedaction); pass the process's redactor's String to count and configure it,
	// or llm.NoRedaction for a server inside the trust boundary.
	Redact func(string) string
}

// Probs are one pair's class probabilities.
type Probs struct {
	Entailment    float64
	Neutral       float64
	Contradiction float64
}

// Scorer asks the NLI server whether each document entails each claim.
type Scorer struct {
	c        Config
	shownURL string                 // c.URL without its credentials, for errors
	requests *prometheus.CounterVec // nil without a Registerer
}

var _ score.Scorer = (*Scorer)(nil)

// New returns a Scorer; unknown metrics and a bad threshold are errors.
func New(c Config) (*Scorer, error) {
	if c.Threshold == 0 {
		c.Threshold = DefaultThreshold
	}
	if c.Threshold < 0 || c.Threshold > 1 {
		return nil, fmt.Errorf("nli threshold %v outside (0, 1]", c.Threshold)
	}
	if c.URL == "" {
		return nil, errors.New("nli url is required")
	}
	// The URL may carry a credential (user info, an API key in the query): errors show it
	// as config.SecretURL prints it, and /predict goes into the path, not after the query.
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("nli url %s is not an absolute http(s) URL", config.SecretURL(c.URL))
	}
	u.Path, u.RawPath = strings.TrimSuffix(u.Path, "/")+"/predict", ""
	if len(c.Metrics) == 0 {
		c.Metrics = Metrics
	}
	for _, m := range c.Metrics {
		if !slices.Contains(Metrics, m) {
			return nil, fmt.Errorf("nli cannot score metric %q", m)
		}
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 32
	}
	if c.MaxPairs <= 0 {
		c.MaxPairs = 256
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if c.Redact == nil {
		c.Redact = llm.DefaultRedaction
	}
	c.URL = u.String()
	s := &Scorer{c: c, shownURL: config.SecretURL(c.URL).String()}
	if c.Registerer != nil {
		s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ragwatch_nli_requests_total",
			Help: "Requests to the NLI model server by outcome (ok, error, timeout, bad_response)."}, []string{"outcome"})
		if err := c.Registerer.Register(s.requests); err != nil {
			return nil, fmt.Errorf("register nli metrics: %w", err)
		}
	}
	return s, nil
}

// Name implements score.Scorer.
func (s *Scorer) Name() string { return "nli" }

// Score implements score.Scorer.
func (s *Scorer) Score(ctx context.Context, r *record.Record) ([]score.Result, error) {
	if strings.TrimSpace(r.Answer) == "" || len(r.Documents) == 0 || text.IsRefusal(r.Answer) {
		return nil, nil // every metric here is a claim metric (score.ClaimMetric)
	}
	var out []score.Result
	var failed score.Failure
	add := func(metric string, value float64, explanation string) {
		w := 1.0
		if r.Sampling != nil && r.Sampling.Probability > 0 {
			w = 1 / r.Sampling.Probability
		}
		out = append(out, score.Result{TraceID: r.TraceID, SpanID: r.SpanID, Service: r.Service, Metric: metric,
			Value: value, Weight: w, Scorer: "nli", Explanation: explanation, Time: s.c.Now()})
	}
	fail := func(metric string, err error) {
		outcome := score.OutcomeError
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			outcome = score.OutcomeTimeout
		}
		failed = append(failed, score.MetricError{Metric: metric, Outcome: outcome, Err: err})
	}
	if slices.Contains(s.c.Metrics, score.Faithfulness) {
		v, expl, ok, err := s.faithfulness(ctx, r)
		switch {
		case err != nil:
			fail(score.Faithfulness, err)
		case ok:
			add(score.Faithfulness, v, expl)
		}
	}
	wantP, wantR := slices.Contains(s.c.Metrics, score.CitationPrecision), slices.Contains(s.c.Metrics, score.CitationRecall)
	if wantP || wantR {
		stmts := llm.Statements(r)
		var pairs [][2]string
		var pairStmt []int
		var found []bool
		for i, st := range stmts {
			for _, id := range st.DocumentIDs {
				if len(pairStmt) == s.c.MaxPairs {
					break
				}
				pairStmt = append(pairStmt, i)
				content, ok := docContent(r, id)
				found = append(found, ok)
				if ok {
					pairs = append(pairs, [2]string{content, st.Text})
				}
			}
		}
		probs, err := s.Predict(ctx, pairs)
		if err != nil {
			if wantP {
				fail(score.CitationPrecision, err)
			}
			if wantR {
				fail(score.CitationRecall, err)
			}
		} else {
			supports := make([]bool, len(pairStmt))
			k := 0
			for i := range pairStmt {
				if found[i] {
					supports[i] = probs[k].Entailment >= s.c.Threshold
					k++
				}
			}
			for _, m := range []string{score.CitationPrecision, score.CitationRecall} {
				if (m == score.CitationPrecision && !wantP) || (m == score.CitationRecall && !wantR) {
					continue
				}
				if v, expl, ok := llm.CitationScore(m, len(stmts), pairStmt, supports); ok {
					add(m, v, expl)
				}
			}
		}
	}
	if len(failed) > 0 {
		return out, failed
	}
	return out, nil
}

func docContent(r *record.Record, id string) (string, bool) {
	for _, d := range r.Documents {
		if d.ID == id {
			return d.Content, true
		}
	}
	return "", false
}

// cut keeps a premise within what an NLI cross-encoder reads (about 512 tokens); the server
// truncates too, this only bounds the request size.
func (s *Scorer) cut(t string) string {
	const limit = 4000
	if len(t) <= limit {
		return t
	}
	i := limit
	for i > 0 && !utf8.RuneStart(t[i]) {
		i--
	}
	return t[:i]
}

// faithfulness: each sentence of the answer (citation markers removed) is a claim; it is
// supported when some document entails it with probability >= threshold.
func (s *Scorer) faithfulness(ctx context.Context, r *record.Record) (float64, string, bool, error) {
	var claims []string
	for _, sent := range text.Sentences(r.Answer) {
		c := stripMarkers(sent)
		if len(strings.Fields(c)) >= 3 {
			claims = append(claims, c)
		}
	}
	if len(claims) == 0 {
		return 0, "", false, nil
	}
	docs := r.Documents
	if limit := max(1, s.c.MaxPairs/len(claims)); len(docs) > limit {
		docs = docs[:limit]
	}
	var pairs [][2]string
	for _, c := range claims {
		for _, d := range docs {
			pairs = append(pairs, [2]string{d.Content, c})
		}
	}
	probs, err := s.Predict(ctx, pairs)
	if err != nil {
		return 0, "", false, err
	}
	supported, contradicted := 0, 0
	for i := range claims {
		best, contra := 0.0, false
		for j := range docs {
			p := probs[i*len(docs)+j]
			best = max(best, p.Entailment)
			if p.Contradiction >= s.c.Threshold {
				contra = true
			}
		}
		if best >= s.c.Threshold {
			supported++
		} else if contra {
			contradicted++
		}
	}
	return float64(supported) / float64(len(claims)),
		fmt.Sprintf("%d of %d sentences entailed (threshold %.2f), %d contradicted", supported, len(claims), s.c.Threshold, contradicted),
		true, nil
}

func stripMarkers(s string) string {
	var b strings.Builder
	depth := 0
	for _, c := range s {
		switch {
		case c == '[':
			depth++
		case c == ']' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(c)
		}
	}
	return strings.ReplaceAll(strings.Join(strings.Fields(b.String()), " "), " .", ".")
}

func (s *Scorer) count(err error) {
	if s.requests == nil {
		return
	}
	var bad badResponse
	switch {
	case err == nil:
		s.requests.WithLabelValues("ok").Inc()
	case errors.As(err, &bad):
		s.requests.WithLabelValues("bad_response").Inc()
	case errors.Is(err, context.DeadlineExceeded):
		s.requests.WithLabelValues("timeout").Inc()
	default:
		s.requests.WithLabelValues("error").Inc()
	}
}

// badResponse is a reply that parsed badly; repeating the request would not help.
type badResponse struct{ msg string }

func (e badResponse) Error() string { return "nli predict: " + e.msg }

func badf(format string, args ...any) error { return badResponse{fmt.Sprintf(format, args...)} }

type label struct {
	Label string  `json:"label"`
	Score float64 `json:"score"`
}

// Predict sends (premise, hypothesis) pairs to /predict in batches and returns the class
// probabilities in order. Every text is redacted (Config.Redact) and premises are cut to
// what the model reads before they are sent.
func (s *Scorer) Predict(ctx context.Context, pairs [][2]string) ([]Probs, error) {
	pairs = s.prepare(pairs)
	out := make([]Probs, 0, len(pairs))
	for start := 0; start < len(pairs); start += s.c.BatchSize {
		end := min(start+s.c.BatchSize, len(pairs))
		got, err := s.predictBatch(ctx, pairs[start:end])
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// prepare redacts every premise and hypothesis, each distinct text once (a document is the
// premise of every claim), and then cuts the premises: redacting first keeps a number at the
// cut from going out in part.
func (s *Scorer) prepare(pairs [][2]string) [][2]string {
	done := make(map[string]string)
	red := func(t string) string {
		v, ok := done[t]
		if !ok {
			v = s.c.Redact(t)
			done[t] = v
		}
		return v
	}
	out := make([][2]string, len(pairs))
	for i, p := range pairs {
		out[i] = [2]string{s.cut(red(p[0])), red(p[1])}
	}
	return out
}

func (s *Scorer) predictBatch(ctx context.Context, pairs [][2]string) ([]Probs, error) {
	inputs := make([][]string, len(pairs))
	for i, p := range pairs {
		inputs[i] = []string{p[0], p[1]}
	}
	body, err := json.Marshal(map[string]any{"inputs": inputs, "truncate": true})
	if err != nil {
		return nil, err
	}
	for n := 0; ; n++ {
		probs, retryAfter, err := s.post(ctx, body, len(pairs))
		s.count(err)
		if err == nil {
			return probs, nil
		}
		var bad badResponse
		if ctx.Err() != nil || n >= s.c.MaxRetries || errors.As(err, &bad) ||
			!(llm.Retryable(err) || errors.Is(err, context.DeadlineExceeded)) {
			return nil, err
		}
		wait := retryAfter
		if wait <= 0 {
			wait = time.Duration(n+1) * 500 * time.Millisecond
		}
		if err := s.c.Sleep(ctx, min(wait, llm.MaxRetryAfter)); err != nil {
			return nil, err
		}
	}
}

func (s *Scorer) post(ctx context.Context, body []byte, n int) ([]Probs, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.c.HTTPClient.Do(req)
	if err != nil {
		// *url.Error prints the request URL, with an API key in its query; the error goes to
		// logs and dead-letter headers.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = s.shownURL
		}
		if ctx.Err() == context.DeadlineExceeded {
			return nil, 0, fmt.Errorf("nli predict: %w", context.DeadlineExceeded)
		}
		return nil, 0, fmt.Errorf("nli predict: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, 0, fmt.Errorf("nli predict: read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, llm.ParseRetryAfter(resp.Header, s.c.Now()),
			fmt.Errorf("nli predict: %w", &llm.APIError{Status: resp.StatusCode, Message: llm.ShortMessage(s.c.Redact(string(data)))})
	}
	var batch [][]label
	if err := json.Unmarshal(data, &batch); err != nil {
		var single []label // some servers answer a batch of one with a flat list
		if n != 1 || json.Unmarshal(data, &single) != nil {
			return nil, 0, badf("response is not a list of label scores: %v", err)
		}
		batch = [][]label{single}
	}
	if len(batch) != n {
		return nil, 0, badf("%d predictions for %d pairs", len(batch), n)
	}
	out := make([]Probs, n)
	for i, labels := range batch {
		seen := false
		for _, l := range labels {
			if l.Score < 0 || l.Score > 1 {
				return nil, 0, badf("score %v outside [0, 1]", l.Score)
			}
			switch strings.ToLower(l.Label) {
			case "entailment", "entails":
				out[i].Entailment, seen = l.Score, true
			case "neutral":
				out[i].Neutral = l.Score
			case "contradiction":
				out[i].Contradiction = l.Score
			}
		}
		if !seen {
			return nil, 0, badf("prediction %d has no entailment label", i)
		}
	}
	return out, 0, nil
}
