package builtin

import (
	"fmt"
	"strings"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/text"
)

// A later turn of a conversation often leans on the earlier ones: "what about the other one?"
// names nothing the answer can be checked against. ResolveQuestion gives such a question the
// content terms of the previous user turn, so that answer relevancy (and the refusal check)
// judge the question the user meant.
//
// The rule: a question is resolved when it has fewer than minContentTerms content words ("And
// Enterprise?"), or holds a pronoun that refers back (it, they, them, he, she, those, the
// other, the former ...; "that" or "this" after a restating verb or at the end: "say that
// shorter", "why is that?"), or opens a follow-up ("and", "what about", "how about"). It is
// then prefixed with the previous user message of the history,
// and, when that message is itself short or anaphoric, with the one before it too, up to
// maxResolveTurns messages. A question that stands alone is left as it is.

// minContentTerms was 3 at first; on the MTRAG sample it resolved standalone questions such as
// "How many teams are in the NFL?" and "Who is the Patriot's coach?" (two content words each)
// and lowered their answer relevancy for nothing: docs/conversations.md.
const (
	minContentTerms = 2
	maxResolveTurns = 3
)

// anaphors are the words that refer back to an earlier turn. "this", "that" and "same" are not
// among them: they are mostly determiners and relatives ("this week", "the coach that won",
// "the same team"); refersBack catches "this" and "that" where they are pronouns.
var anaphors = set("it", "its", "they", "them", "their", "theirs", "these", "those",
	"he", "she", "him", "her", "his", "hers", "former", "latter")

// anaphoricPhrases refer back in two words.
var anaphoricPhrases = []string{"the other", "that one", "this one", "the first one", "the second one", "the last one"}

var followUpOpeners = []string{"and ", "what about ", "how about ", "what of ", "also ", "but "}

// restating are the verbs of a request about an earlier answer; "that" or "this" right after
// one is the thing said before ("can you say that shorter?", "explain this again", "what does
// that mean"), not a determiner.
var restating = set("say", "explain", "repeat", "rephrase", "reword", "summarize", "summarise",
	"clarify", "expand", "elaborate", "simplify", "translate", "shorten", "rewrite", "put")

// refersBack reports "that"/"this" used as a pronoun: after a restating verb, before "mean"
// ("what does that mean"), or as the question's last word ("why is that?").
func refersBack(ws []string) bool {
	for i, w := range ws {
		if w != "that" && w != "this" {
			continue
		}
		if i == len(ws)-1 || (i > 0 && restating[ws[i-1]]) ||
			(i+1 < len(ws) && (ws[i+1] == "mean" || ws[i+1] == "means")) {
			return true
		}
	}
	return false
}

// formWords ask for a form of the answer ("can you say that shorter", "explain it more
// simply"), not for content: answer relevancy does not look for them in the answer.
var formWords = set("you", "say", "explain", "repeat", "rephrase", "reword", "clarify", "expand",
	"elaborate", "simplify", "translate", "shorten", "rewrite", "shorter", "simpler", "simply",
	"again", "detail", "detailed", "please", "plain", "english")

// ResolveQuestion returns query resolved against history (oldest first) by the rule above, and
// whether it was resolved.
func ResolveQuestion(query string, history []record.Message) (string, bool) {
	if !needsContext(query) {
		return query, false
	}
	var prev []string
	for i := len(history) - 1; i >= 0 && len(prev) < maxResolveTurns; i-- {
		if history[i].Role != record.RoleUser || strings.TrimSpace(history[i].Content) == "" {
			continue
		}
		prev = append(prev, history[i].Content)
		if !needsContext(history[i].Content) {
			break
		}
	}
	if len(prev) == 0 {
		return query, false
	}
	var b strings.Builder
	for i := len(prev) - 1; i >= 0; i-- {
		b.WriteString(prev[i])
		b.WriteString(" \n")
	}
	b.WriteString(query)
	return b.String(), true
}

// needsContext reports whether a question is short, anaphoric or a follow-up.
func needsContext(q string) bool {
	lower := strings.ToLower(strings.TrimSpace(q))
	for _, o := range followUpOpeners {
		if strings.HasPrefix(lower, o) {
			return true
		}
	}
	for _, p := range anaphoricPhrases {
		if strings.Contains(lower, p) {
			return true
		}
	}
	ws := words(q)
	for _, w := range ws {
		if anaphors[w] {
			return true
		}
	}
	if refersBack(ws) {
		return true
	}
	content := 0
	for t := range eachToken(q) {
		if !t.stop && !t.meta {
			content++
		}
	}
	return content < minContentTerms
}

// refusalRelevancy scores a refusal's answer relevancy: 1 when the context does not support an
// answer to the question (declining is the relevant answer), 0 when it does.
func (j *judge) refusalRelevancy(query string) (float64, string, bool) {
	ok, why := j.answerable(query)
	if ok {
		return 0, "refusal although " + why, true
	}
	return 1, "correct refusal: " + why, true
}

// refusalCorrect is refusal_correct (score.RefusalCorrect) for an answer that declines: 1 when
// the context does not support an answer, 0 when it does; ok is false for an answer that is not
// a refusal.
func (j *judge) refusalCorrect(query, answer string) (float64, string, bool) {
	if !text.IsRefusal(answer) {
		return 0, "", false
	}
	ok, why := j.answerable(query)
	if ok {
		return 0, "unwarranted refusal: " + why, true
	}
	return 1, "correct refusal: " + why, true
}

// answerable reports whether the retrieved context supports an answer to question: the
// question, taken as a claim, is supported by a passage at the scorer's threshold (its content
// terms, weighted by rarity, are found together in the context).
func (j *judge) answerable(question string) (bool, string) {
	if !hasDocContent(j.docs) {
		return false, "nothing retrieved"
	}
	s, _ := j.index().support(tokenize(question), nil)
	return s >= j.threshold, fmt.Sprintf("the context covers the question at %.2f (threshold %.2f)", s, j.threshold)
}
