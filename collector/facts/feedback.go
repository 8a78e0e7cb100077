package facts

import (
	"strings"

	"github.com/ragwatch/ragwatch/collector/conventions"
	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// annotation is one OpenInference annotations.{i}.annotation.* (or evaluations.{i}.evaluation.*).
type annotation struct {
	name, label, explanation, kind string
	score                          *float64
}

func setAnnotation(anns []annotation, rest, prefix string, v span.Value) []annotation {
	i, field, ok := conventions.SplitIndex(rest, 256)
	if !ok || !strings.HasPrefix(field, prefix) {
		return anns
	}
	for len(anns) <= i {
		anns = append(anns, annotation{})
	}
	a := &anns[i]
	if prefix == "evaluation." && a.kind == "" {
		a.kind = "EVAL" // evaluations are automated unless they say otherwise
	}
	switch field[len(prefix):] {
	case "name":
		a.name = v.Text()
	case "label":
		a.label = v.Text()
	case "explanation":
		a.explanation = v.Text()
	case "annotator_kind":
		a.kind = strings.ToUpper(v.Text())
	case "score":
		if n, ok := v.Number(); ok {
			a.score = &n
		}
	}
	return anns
}

// feedback maps the annotation to a feedback verdict and its precedence rank.
func (a annotation) feedback() (*record.Feedback, int) {
	fb := verdict(a.score, a.label)
	if fb == nil {
		return nil, RankNone
	}
	fb.Comment = truncate.String(a.explanation, 4096)
	switch a.kind {
	case "HUMAN":
		return fb, rankHuman
	case "":
		return fb, rankPlain
	default:
		return fb, rankAuto
	}
}

// verdict turns a (score, label) pair into a feedback score in [-1, 1]. A label with a known
// sentiment wins (Phoenix thumbs carry score 0/1 with label "thumbs-down"/"thumbs-up"); else
// the score, clamped to [-1, 1]. Neither: nil.
func verdict(score *float64, label string) *record.Feedback {
	if s, ok := labelScore(label); ok {
		return &record.Feedback{Score: s}
	}
	if score == nil {
		return nil
	}
	return &record.Feedback{Score: max(-1, min(1, *score))}
}

var labelReplacer = strings.NewReplacer("-", "_", " ", "_")

// labelScore maps common feedback and evaluation labels to a sentiment.
func labelScore(label string) (float64, bool) {
	l := strings.ToLower(strings.TrimSpace(label))
	l = labelReplacer.Replace(l)
	switch l {
	case "thumbs_up", "thumbsup", "up", "👍", "positive", "good", "correct", "helpful", "like", "liked",
		"yes", "true", "relevant", "factual", "faithful", "accept", "accepted", "pass", "passed", "+1":
		return 1, true
	case "thumbs_down", "thumbsdown", "down", "👎", "negative", "bad", "incorrect", "unhelpful",
		"dislike", "disliked", "no", "false", "irrelevant", "hallucinated", "hallucination",
		"unfaithful", "reject", "rejected", "fail", "failed", "-1":
		return -1, true
	case "neutral":
		return 0, true
	}
	return 0, false
}

// feedbackFromValue reads rag.feedback: a number, a bool, a label, or a JSON object
// {"score": n, "label": "...", "comment": "..."}.
func feedbackFromValue(v span.Value) *record.Feedback {
	switch v.Type {
	case span.TypeInt, span.TypeDouble:
		n, ok := v.Number()
		if !ok {
			return nil
		}
		return verdict(&n, "")
	case span.TypeBool:
		if v.Num() != 0 {
			return &record.Feedback{Score: 1}
		}
		return &record.Feedback{Score: -1}
	}
	if obj, ok := v.Structured().(map[string]any); ok {
		var score *float64
		if n, ok := asNumber(obj["score"]); ok {
			score = &n
		}
		fb := verdict(score, span.AsString(obj["label"]))
		if fb != nil {
			fb.Comment = truncate.String(span.AsString(obj["comment"]), 4096)
		}
		return fb
	}
	if n, ok := v.Number(); ok {
		return verdict(&n, "")
	}
	return verdict(nil, v.Text())
}

// feedbackFromEvaluationEvent reads a GenAI gen_ai.evaluation.result event.
func feedbackFromEvaluationEvent(ev *span.Event) *record.Feedback {
	var score *float64
	var label, explanation string
	for i := range ev.Attrs {
		switch ev.Attrs[i].Key {
		case "gen_ai.evaluation.score.value":
			if n, ok := ev.Attrs[i].Value.Number(); ok {
				score = &n
			}
		case "gen_ai.evaluation.score.label":
			label = ev.Attrs[i].Value.Text()
		case "gen_ai.evaluation.explanation":
			explanation = ev.Attrs[i].Value.Text()
		}
	}
	fb := verdict(score, label)
	if fb != nil {
		fb.Comment = truncate.String(explanation, 4096)
		fb.Time = ev.Time
	}
	return fb
}
