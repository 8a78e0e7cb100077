package service

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/httpapi"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/redact"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/tlsauth"
	"github.com/ragwatch/ragwatch/sampler/scorers"
)

// secretFile is a token set or a TLS config that a reload reads again from its files: Prepare
// reads them, commit puts them in force. key names it in a rejected reload's problems.
type secretFile struct {
	key     string
	prepare func() (commit func(), err error)
}

// otlpSec is the resolved TLS configs and bearer tokens of the OTLP receivers.
type otlpSec struct {
	grpcTLS, otlpHTTPTLS       *tls.Config
	grpcTokens, otlpHTTPTokens *tlsauth.Tokens
}

// otlpSecurity resolves the receivers' TLS and tokens and adds them to the App's secret
// files, so a reload rotates them.
func (a *App) otlpSecurity(cfg *config.Config) (otlpSec, error) {
	var s otlpSec
	o := cfg.Receivers.OTLP
	grpcTLS, err := tlsauth.NewServerConfig(o.GRPC.TLS, "h2")
	if err != nil {
		return s, fmt.Errorf("receivers.otlp.grpc.tls: %w", err)
	}
	httpTLS, err := tlsauth.NewServerConfig(o.HTTP.TLS, "h2", "http/1.1")
	if err != nil {
		return s, fmt.Errorf("receivers.otlp.http.tls: %w", err)
	}
	if s.grpcTokens, err = tlsauth.NewTokens(o.GRPC.Auth); err != nil {
		return s, fmt.Errorf("receivers.otlp.grpc.auth: %w", err)
	}
	if s.otlpHTTPTokens, err = tlsauth.NewTokens(o.HTTP.Auth); err != nil {
		return s, fmt.Errorf("receivers.otlp.http.auth: %w", err)
	}
	s.grpcTLS, s.otlpHTTPTLS = grpcTLS.TLS(), httpTLS.TLS()
	a.rotate("receivers.otlp.grpc.tls", grpcTLS != nil, grpcTLS.Prepare)
	a.rotate("receivers.otlp.http.tls", httpTLS != nil, httpTLS.Prepare)
	a.rotate("receivers.otlp.grpc.auth", s.grpcTokens != nil, s.grpcTokens.Prepare)
	a.rotate("receivers.otlp.http.auth", s.otlpHTTPTokens != nil, s.otlpHTTPTokens.Prepare)
	return s, nil
}

// httpSecurity resolves http.tls and http.auth, which `ragwatch run` and `ragwatch worker`
// apply alike to their HTTP listeners.
func (a *App) httpSecurity(cfg *config.Config) (*tls.Config, *tlsauth.Tokens, error) {
	tlsConf, err := tlsauth.NewServerConfig(cfg.HTTP.TLS, "h2", "http/1.1")
	if err != nil {
		return nil, nil, fmt.Errorf("http.tls: %w", err)
	}
	tokens, err := tlsauth.NewTokens(cfg.HTTP.Auth)
	if err != nil {
		return nil, nil, fmt.Errorf("http.auth: %w", err)
	}
	a.rotate("http.tls", tlsConf != nil, tlsConf.Prepare)
	a.rotate("http.auth", tokens != nil, tokens.Prepare)
	return tlsConf.TLS(), tokens, nil
}

func (a *App) rotate(key string, enabled bool, prepare func() (func(), error)) {
	if enabled {
		a.secretFiles = append(a.secretFiles, secretFile{key: key, prepare: prepare})
	}
}

// buildRedactor builds the one redactor of the process from cfg.Redaction; nil when disabled
// (a nil *redact.Redactor leaves text unchanged).
func buildRedactor(cfg *config.Config, reg prometheus.Registerer) (*redact.Redactor, error) {
	if !cfg.Redaction.Enabled {
		return nil, nil
	}
	var custom []redact.Pattern
	for _, p := range cfg.Redaction.Patterns {
		custom = append(custom, redact.Pattern{Name: p.Name, Regex: p.Regex})
	}
	r, err := redact.New(cfg.Redaction.Detectors, custom, reg)
	if err != nil {
		return nil, fmt.Errorf("redaction: %w", err)
	}
	return r, nil
}

// redactScorers wraps every scorer so that the explanations of its results are redacted at
// the source: they are published on ragwatch.scores.<service> and served by /api/v1/scores.
func redactScorers(scorers []score.Scorer, r *redact.Redactor) []score.Scorer {
	if r == nil {
		return scorers
	}
	out := make([]score.Scorer, len(scorers))
	for i, s := range scorers {
		out[i] = redactingScorer{Scorer: s, r: r}
	}
	return out
}

type redactingScorer struct {
	score.Scorer
	r *redact.Redactor
}

// Score implements score.Scorer.
func (s redactingScorer) Score(ctx context.Context, rec *record.Record) ([]score.Result, error) {
	res, err := s.Scorer.Score(ctx, rec)
	for i := range res {
		res[i].Explanation = s.r.String(res[i].Explanation)
	}
	return res, err
}

// configHandler serves GET /api/v1/config: the effective config as JSON. Credentials are
// hidden by their type: config.Secret and config.SecretURL fields marshal redacted, so what is
// shown needs no list of key names here. References to secrets (`*_env`, `*_file`) are shown:
// they say where a secret is, not what it is.
func configHandler(cfg *config.Config) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		v, err := configTree(cfg)
		if err != nil {
			httpapi.WriteError(w, http.StatusInternalServerError, "encode config: "+err.Error())
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, v)
	})
}

// configTree is the config under its YAML key names, ready to be written as JSON.
func configTree(cfg *config.Config) (map[string]any, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return nil, err
	}
	return tree, nil
}

// JudgeRedaction is the scorers.Build option that makes LLM judges (prompts, embeddings inputs)
// and the NLI scorer redact what they send with r (custom patterns, counted). With r nil
// (redaction disabled) they keep their built-in default: text to an external model server is
// redacted regardless.
func JudgeRedaction(r *redact.Redactor) []scorers.Option {
	if r == nil {
		return nil
	}
	return []scorers.Option{scorers.WithRedact(r.String)}
}

// recentSink is what the /api/v1/scores ring takes: scores and, with include_content, records.
type recentSink interface {
	score.Consumer
	record.Consumer
}

// redactingRecent redacts what reaches the ring behind GET /api/v1/scores: explanations of
// results from any worker (pods too) and the query and answer previews of records.
type redactingRecent struct {
	next recentSink
	r    *redact.Redactor
}

func redactRecent(next recentSink, r *redact.Redactor) recentSink {
	if r == nil {
		return next
	}
	return redactingRecent{next: next, r: r}
}

// ConsumeScores implements score.Consumer on copies: the results are shared with other
// consumers.
func (s redactingRecent) ConsumeScores(ctx context.Context, results []score.Result) error {
	out := make([]score.Result, len(results))
	for i, res := range results {
		res.Explanation = s.r.String(res.Explanation)
		out[i] = res
	}
	return s.next.ConsumeScores(ctx, out)
}

// ConsumeRecord implements record.Consumer with a shallow copy whose query and answer are
// redacted; the record itself goes on unchanged to the other stages.
func (s redactingRecent) ConsumeRecord(ctx context.Context, rec *record.Record) error {
	c := *rec
	c.Query, c.Answer = s.r.String(rec.Query), s.r.String(rec.Answer)
	return s.next.ConsumeRecord(ctx, &c)
}

// OfflineJudgeOptions are the scorer options of `ragwatch eval`: the same redaction of judge
// prompts as the service (the redaction section of cfg) and the judges of the judges section,
// so that an offline run sends an LLM exactly what the service would.
func OfflineJudgeOptions(cfg *config.Config) ([]scorers.Option, error) {
	r, err := buildRedactor(cfg, nil)
	if err != nil {
		return nil, err
	}
	return append(JudgeRedaction(r), scorers.WithJudges(cfg.Judges, nil)), nil
}

// OfflineRedactor is the redaction section of cfg as one function, for the offline commands
// that write user content out (`ragwatch generate`); nil when redaction is off.
func OfflineRedactor(cfg *config.Config) (func(string) string, error) {
	r, err := buildRedactor(cfg, nil)
	if err != nil || r == nil {
		return nil, err
	}
	return r.String, nil
}
