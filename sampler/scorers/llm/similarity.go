package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// ---- answer similarity ----

func (s *Scorer) answerSimilarity(ctx context.Context, r *record.Record, u *call) (verdict, error) {
	if strings.TrimSpace(r.Reference) == "" || strings.TrimSpace(r.Answer) == "" {
		return verdict{skip: true}, nil
	}
	if s.embed == nil {
		return s.geval(ctx, similarityJudge, similarityJudge.Version(), r, u)
	}
	if err := u.notAsked(); err != nil {
		return verdict{}, err
	}
	vecs, tok, err := s.embedTexts(ctx, []string{r.Answer, r.Reference})
	u.InputTokens += tok
	if err != nil {
		return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: fmt.Errorf("embeddings: %w", err)}
	}
	if len(vecs) != 2 {
		return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: fmt.Errorf("embeddings: %d vectors for 2 texts", len(vecs))}
	}
	c, err := cosine(vecs[0], vecs[1])
	if err != nil {
		return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: err}
	}
	return verdict{value: math.Min(1, math.Max(0, c)), explanation: "embedding cosine of answer and reference"}, nil
}

// embedTexts sends texts to the embeddings model, each cut to the prompt size (cut redacts a
// text before cutting it) and redacted with the judge's redactor: embeddings leave the
// process like prompts do.
func (s *Scorer) embedTexts(ctx context.Context, texts []string) ([][]float64, int64, error) {
	out := make([]string, len(texts))
	for i, t := range texts {
		out[i] = s.j.opts.Redact(s.cut(t))
	}
	return s.embed.Embed(ctx, out)
}

func cosine(a, b []float64) (float64, error) {
	if len(a) == 0 || len(a) != len(b) {
		return 0, fmt.Errorf("embeddings of different sizes (%d, %d)", len(a), len(b))
	}
	var dot, na, nb float64
	for i := range a {
		dot += a[i] * b[i]
		na += a[i] * a[i]
		nb += b[i] * b[i]
	}
	if na == 0 || nb == 0 {
		return 0, errors.New("zero embedding vector")
	}
	return dot / math.Sqrt(na*nb), nil
}
