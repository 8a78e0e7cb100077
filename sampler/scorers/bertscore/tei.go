package bertscore

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// Token is one token of a text as text-embeddings-inference's /tokenize returns it.
type Token struct {
	ID      uint32 `json:"id"`
	Special bool   `json:"special"`
}

// TEI is a client of a text-embeddings-inference server: POST /tokenize
// ({"inputs": [...], "add_special_tokens": true} → per text, its tokens) and POST /embed_all
// ({"inputs": [...], "truncate": true} → per text, one embedding per token, special tokens
// included, in the same order).
type TEI struct {
	URL    string // the server's base URL
	Client *http.Client
	Now    func() time.Time
}

// TokenEmbeddings returns each text's tokens and their embeddings.
func (c TEI) TokenEmbeddings(ctx context.Context, texts []string) ([][]Token, [][][]float64, error) {
	base := strings.TrimRight(c.URL, "/")
	client := c.Client
	if client == nil {
		client = http.DefaultClient
	}
	var toks [][]Token
	if err := llm.PostJSON(ctx, client, base+"/tokenize", nil, map[string]any{"inputs": texts, "add_special_tokens": true}, &toks, c.Now); err != nil {
		return nil, nil, fmt.Errorf("tokenize: %w", err)
	}
	var embs [][][]float64
	if err := llm.PostJSON(ctx, client, base+"/embed_all", nil, map[string]any{"inputs": texts, "truncate": true}, &embs, c.Now); err != nil {
		return nil, nil, fmt.Errorf("embed_all: %w", err)
	}
	if len(toks) != len(texts) || len(embs) != len(texts) {
		return nil, nil, fmt.Errorf("the server answered %d tokenizations and %d embeddings for %d texts", len(toks), len(embs), len(texts))
	}
	for i := range texts {
		// /tokenize does not truncate: a text past the model's length has more tokens than
		// /embed_all embedded; the embedded ones are its first tokens.
		if len(embs[i]) > len(toks[i]) || len(embs[i]) == 0 {
			return nil, nil, fmt.Errorf("text %d: %d token embeddings for %d tokens", i, len(embs[i]), len(toks[i]))
		}
		toks[i] = toks[i][:len(embs[i])]
	}
	return toks, embs, nil
}
