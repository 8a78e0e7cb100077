package bertscore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/text"
	"github.com/ragwatch/ragwatch/internal/truncate"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// TokenEmbedder returns each text's tokens and one embedding per token (TEI).
type TokenEmbedder interface {
	TokenEmbeddings(ctx context.Context, texts []string) ([][]Token, [][][]float64, error)
}

// Baseline holds the rescaling baselines of precision, recall and F1 (0: raw).
type Baseline struct{ Precision, Recall, F1 float64 }

// Options configures a Scorer: Tokens (BERTScore proper) or, without it, Sentences (an
// OpenAI-compatible embeddings API: the same matching over sentence embeddings).
type Options struct {
	Tokens    TokenEmbedder
	Sentences llm.Embedder
	Model     string // the embeddings model, for the results' cost (sentence mode)
	// IDF weighs tokens by inverse document frequency over the references scored so far
	// (token mode); nil weighs every token 1.
	IDF      *IDF
	Baseline Baseline
	// Redact cleans a text before it leaves the process; nil uses llm.DefaultRedaction.
	Redact func(string) string
	// MaxTextBytes cuts each text before it is sent (0: 32 KiB).
	MaxTextBytes int
	Now          func() time.Time
}

// Scorer scores bertscore_precision, bertscore_recall and bertscore_f1 of a record's answer
// against its reference; records without both get no results.
type Scorer struct{ o Options }

var _ score.Scorer = (*Scorer)(nil)

// New returns a Scorer; it needs Tokens or Sentences.
func New(o Options) (*Scorer, error) {
	if o.Tokens == nil && o.Sentences == nil {
		return nil, errors.New("bertscore: needs a token-embeddings server (scoring.bertscore.url) or an embeddings model (scoring.openai.embeddings_model)")
	}
	if o.Redact == nil {
		o.Redact = llm.DefaultRedaction
	}
	if o.MaxTextBytes <= 0 {
		o.MaxTextBytes = 32 << 10
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Scorer{o: o}, nil
}

// Name implements score.Scorer.
func (s *Scorer) Name() string { return "bertscore" }

var metrics = []string{score.BERTScorePrecision, score.BERTScoreRecall, score.BERTScoreF1}

// Score implements score.Scorer.
func (s *Scorer) Score(ctx context.Context, r *record.Record) ([]score.Result, error) {
	if strings.TrimSpace(r.Answer) == "" || strings.TrimSpace(r.Reference) == "" {
		return nil, nil
	}
	cand, ref := s.prepare(r.Answer), s.prepare(r.Reference)
	var p, rc, f float64
	var tokens int64
	var how string
	var err error
	if s.o.Tokens != nil {
		p, rc, f, err = s.tokenScore(ctx, cand, ref)
		how = "greedy matching of token embeddings"
		if s.o.IDF != nil {
			how += ", idf-weighted"
		}
	} else {
		p, rc, f, tokens, err = s.sentenceScore(ctx, cand, ref)
		how = "greedy matching of sentence embeddings"
	}
	if err != nil {
		fails := make(score.Failure, len(metrics))
		for i, m := range metrics {
			fails[i] = score.MetricError{Metric: m, Outcome: score.OutcomeError, Err: err}
		}
		return nil, fails
	}
	b := s.o.Baseline
	if b != (Baseline{}) {
		p, rc, f = Rescale(p, b.Precision), Rescale(rc, b.Recall), Rescale(f, b.F1)
		how += ", rescaled with the baseline"
	}
	now := s.o.Now()
	out := make([]score.Result, 0, 3)
	for i, v := range []float64{p, rc, f} {
		res := score.Result{TraceID: r.TraceID, SpanID: r.SpanID, Service: r.Service, Variant: r.Variant, Metric: metrics[i],
			Value: clamp(v), Weight: weight(r), Scorer: "bertscore", Time: now, Turn: r.Turn, Explanation: how}
		if i == 0 && tokens > 0 {
			res.Model, res.InputTokens = s.o.Model, tokens // the embeddings call's cost, once
		}
		out = append(out, res)
	}
	return out, nil
}

// prepare redacts a text, then cuts it to MaxTextBytes on a UTF-8 boundary.
func (s *Scorer) prepare(t string) string { return truncate.String(s.o.Redact(t), s.o.MaxTextBytes) }

func (s *Scorer) tokenScore(ctx context.Context, cand, ref string) (p, r, f float64, err error) {
	toks, embs, err := s.o.Tokens.TokenEmbeddings(ctx, []string{cand, ref})
	if err != nil {
		return 0, 0, 0, err
	}
	wc, wr := s.weights(toks[0], false), s.weights(toks[1], true)
	return Greedy(embs[0], embs[1], wc, wr)
}

// weights are 1 (or the idf) for ordinary tokens and 0 for special ones. The reference's
// tokens are counted into the IDF table first, so a table is never empty.
func (s *Scorer) weights(toks []Token, reference bool) []float64 {
	ids := make([]uint32, len(toks))
	for i, t := range toks {
		ids[i] = t.ID
	}
	var w []float64
	if s.o.IDF != nil {
		if reference {
			var plain []uint32
			for _, t := range toks {
				if !t.Special {
					plain = append(plain, t.ID)
				}
			}
			s.o.IDF.Add(plain)
		}
		w = s.o.IDF.Weights(ids)
	} else {
		w = make([]float64, len(toks))
		for i := range w {
			w[i] = 1
		}
	}
	total := 0.0
	for i, t := range toks {
		if t.Special {
			w[i] = 0
		}
		total += w[i]
	}
	if total == 0 {
		// Every token is in every reference seen so far (the first reference, say): idf says
		// nothing yet, so each ordinary token weighs 1.
		for i, t := range toks {
			if !t.Special {
				w[i] = 1
			}
		}
	}
	return w
}

func (s *Scorer) sentenceScore(ctx context.Context, cand, ref string) (p, r, f float64, tokens int64, err error) {
	cs, rs := sentences(cand), sentences(ref)
	vecs, tokens, err := s.o.Sentences.Embed(ctx, append(append([]string{}, cs...), rs...))
	if err != nil {
		return 0, 0, 0, tokens, fmt.Errorf("embeddings: %w", err)
	}
	if len(vecs) != len(cs)+len(rs) {
		return 0, 0, 0, tokens, fmt.Errorf("embeddings: %d vectors for %d sentences", len(vecs), len(cs)+len(rs))
	}
	p, r, f, err = Greedy(vecs[:len(cs)], vecs[len(cs):], nil, nil)
	return p, r, f, tokens, err
}

func sentences(t string) []string {
	out := text.Sentences(t)
	if len(out) == 0 {
		out = []string{t}
	}
	return out
}

func clamp(v float64) float64 {
	switch {
	case v < 0:
		return 0
	case v > 1:
		return 1
	}
	return v
}

// weight is 1/p for a sampled record, else 1.
func weight(r *record.Record) float64 {
	if r.Sampling != nil && r.Sampling.Probability > 0 {
		return 1 / r.Sampling.Probability
	}
	return 1
}
