package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds a request body; ragwatch's prompts are a few tens of KB.
const maxBody = 4 << 20

func readBody(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, maxBody))
}

// chatRequest is the part of an OpenAI chat completion request the judge reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"` // a string or a list of parts
	} `json:"messages"`
	ResponseFormat struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema map[string]any `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// answer is the status and body of the reply to a request of an ok judge.
func answer(path string, body []byte) (int, []byte) {
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		var req chatRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return http.StatusBadRequest, apiError("request is not JSON")
		}
		prompt := ""
		for _, m := range req.Messages {
			if m.Role == "user" {
				prompt = text(m.Content)
			}
		}
		var schema map[string]any
		if req.ResponseFormat.Type == "json_schema" {
			schema = req.ResponseFormat.JSONSchema.Schema
		}
		content, err := json.Marshal(verdict(schema, items(prompt), "", 0))
		if err != nil {
			return http.StatusInternalServerError, apiError("cannot encode a verdict")
		}
		in := int64(len(body) / 4) // about 4 bytes a token
		out := int64(len(content) / 4)
		reply, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-slowjudge", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": string(content)}}},
			"usage": map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
		})
		return http.StatusOK, reply
	case strings.HasSuffix(path, "/embeddings"):
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return http.StatusBadRequest, apiError("request is not JSON with a list of inputs")
		}
		data := make([]any, len(req.Input))
		for i := range req.Input {
			// Every text points the same way: cosine 1, a relevant answer.
			data[i] = map[string]any{"object": "embedding", "index": i, "embedding": []float64{0.6, 0.8}}
		}
		reply, _ := json.Marshal(map[string]any{"object": "list", "model": req.Model, "data": data,
			"usage": map[string]any{"prompt_tokens": len(body) / 4, "total_tokens": len(body) / 4}})
		return http.StatusOK, reply
	}
	return http.StatusNotFound, apiError("no such endpoint")
}

func apiError(msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg}})
	return b
}

// text is a message's content: a string, or the text parts of a list.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// indexRange is how ragwatch's prompts say how many indexed verdicts they want.
var indexRange = regexp.MustCompile(`\(0 to (\d+)\)`)

// items is the number of indexed verdicts the prompt asks for (its last "(0 to N)"), 0 when
// it asks for none.
func items(prompt string) int {
	m := indexRange.FindAllStringSubmatch(prompt, -1)
	if len(m) == 0 {
		return 0
	}
	n, err := strconv.Atoi(m[len(m)-1][1])
	if err != nil || n < 0 || n > 1000 {
		return 0
	}
	return n + 1
}

// verdict builds a value that matches schema (the subset ragwatch sends: object, array,
// string, integer, number, boolean, enum): every property, the first enum value (a judge that
// agrees: "supported", "useful"), true, and for integers the item's position when the field
// is "index", else 4 (ragwatch's ratings are 1-5). An array of objects with an "index" holds n
// items (what the prompt asked for), any other array two. A nil schema gives an empty object.
func verdict(schema map[string]any, n int, name string, pos int) any {
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	switch schema["type"] {
	case "object":
		props, _ := schema["properties"].(map[string]any)
		out := make(map[string]any, len(props))
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ps, _ := props[k].(map[string]any)
			out[k] = verdict(ps, n, k, pos)
		}
		return out
	case "array":
		is, _ := schema["items"].(map[string]any)
		count := 2
		if props, ok := is["properties"].(map[string]any); ok && props["index"] != nil {
			count = n
		}
		out := make([]any, count)
		for i := range out {
			out[i] = verdict(is, n, "", i)
		}
		return out
	case "string":
		if name == "" {
			return fmt.Sprintf("Statement %d of the answer.", pos+1)
		}
		return "Judged by slowjudge."
	case "integer":
		if name == "index" {
			return pos
		}
		return 4
	case "number":
		return 0.8
	case "boolean":
		return true
	}
	return map[string]any{}
}
