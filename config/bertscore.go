package config

import "time"

// BERTScore configures the bertscore_precision, bertscore_recall and bertscore_f1 metrics of an
// answer against its record's reference (docs/offline-eval.md#bertscore). With URL, the token
// embeddings come from a text-embeddings-inference server (/tokenize and /embed_all); without
// it, sentence embeddings from scoring.openai.embeddings_model are matched instead.
type BERTScore struct {
	Enabled bool      `yaml:"enabled"`
	URL     SecretURL `yaml:"url"`
	// IDF weighs tokens by their inverse document frequency over the references of the records
	// scored so far (token-embeddings mode only).
	IDF bool `yaml:"idf"`
	// Baseline rescales each score s to (s − b) / (1 − b); the values are the model's
	// published baselines. Zero values leave the scores raw.
	Baseline BERTScoreBaseline `yaml:"baseline"`
	Timeout  time.Duration     `yaml:"timeout"`
	// MaxIDFTokens bounds the token ids whose document frequency is kept.
	MaxIDFTokens int `yaml:"max_idf_tokens"`
}

// BERTScoreBaseline are the rescaling baselines of precision, recall and F1.
type BERTScoreBaseline struct {
	Precision float64 `yaml:"precision"`
	Recall    float64 `yaml:"recall"`
	F1        float64 `yaml:"f1"`
}

func defaultBERTScore() BERTScore { return BERTScore{Timeout: 30 * time.Second, MaxIDFTokens: 1 << 18} }

// Validate implements Validator.
func (b BERTScore) Validate() error {
	var errs []error
	if b.Timeout <= 0 {
		errs = append(errs, Invalid("timeout", "must be positive, got %v", b.Timeout))
	}
	if b.MaxIDFTokens <= 0 {
		errs = append(errs, Invalid("max_idf_tokens", "must be positive, got %d", b.MaxIDFTokens))
	}
	for key, v := range map[string]float64{"baseline.precision": b.Baseline.Precision, "baseline.recall": b.Baseline.Recall, "baseline.f1": b.Baseline.F1} {
		if !(v >= 0 && v < 1) {
			errs = append(errs, Invalid(key, "must be in [0, 1), got %v", v))
		}
	}
	if b.URL.Reveal() != "" {
		if err := checkURL(b.URL.Reveal()); err != nil {
			errs = append(errs, Invalid("url", "%v", err))
		}
	}
	return joinErrs(errs)
}
