package llm

import (
	"github.com/ragwatch/ragwatch/internal/score"
)

// The built-in rubrics are G-Eval judges (geval.go) with fixed definitions: criteria, the
// evaluation steps written out, and a described 1..5 scale, normalised (s-1)/4.

// rubricSteps are the evaluation steps of every built-in rubric.
var rubricSteps = []string{
	"Read the QUESTION and the other blocks.",
	"List what a good answer needs.",
	"Compare the ANSWER with it.",
	"Pick the score whose description fits best.",
}

const (
	rubricRelevancy = `5: answers exactly the question asked, nothing missing or off-topic.
4: answers the question with minor digressions or a small gap.
3: partly answers it; important parts missing or buried in unrelated text.
2: mostly off-topic; touches the question only in passing.
1: does not address the question, or refuses without reason.`
	rubricSimilarity = `5: same meaning as the reference; every key fact agrees.
4: same main point; a minor fact missing or added.
3: partly the same; some key facts missing or different.
2: mostly different; shares only a little with the reference.
1: unrelated to or contradicting the reference.`
)

// BuiltinJudges are the definitions of the rubric metrics (score.Rubric*).
var BuiltinJudges = map[string]JudgeDef{
	score.RubricRelevance: {Metric: score.RubricRelevance, Min: 1, Max: 5, Steps: rubricSteps,
		Criteria:  "relevance: how well the ANSWER addresses the QUESTION",
		ScaleText: rubricRelevancy, Inputs: []string{InputHistory, InputQuestion, InputAnswer}},
	score.RubricCompleteness: {Metric: score.RubricCompleteness, Min: 1, Max: 5, Steps: rubricSteps,
		Criteria: "completeness: whether the ANSWER covers every part of the QUESTION (and the key points of the REFERENCE when one is given)",
		ScaleText: `5: every part of the question answered with the necessary detail.
4: all main parts answered; a minor detail missing.
3: some parts answered, at least one important part missing.
2: only a small part of the question answered.
1: none of the question answered.`, Inputs: []string{InputQuestion, InputAnswer, InputReference}},
	score.RubricAccuracy: {Metric: score.RubricAccuracy, Min: 1, Max: 5, Steps: rubricSteps,
		Criteria: "accuracy: whether every statement in the ANSWER is correct according to the DOCUMENTs (and the REFERENCE when one is given)",
		ScaleText: `5: every statement correct and supported.
4: correct overall; one minor unsupported or imprecise detail.
3: a mix of correct statements and unsupported or wrong ones.
2: mostly unsupported or wrong.
1: wrong on the main point or contradicts the documents.`, Inputs: []string{InputQuestion, InputContext, InputAnswer, InputReference}},
	score.RubricCitationQuality: {Metric: score.RubricCitationQuality, Min: 1, Max: 5, Steps: rubricSteps,
		Criteria: "citation quality: whether the ANSWER cites documents (markers like [1] or [doc-id]) for its factual statements and whether each cited document supports the statement it is attached to",
		ScaleText: `5: every factual statement cited, and every citation supports its statement.
4: nearly all statements cited correctly; one missing or weak citation.
3: some statements cited; several missing or unsupportive citations.
2: few citations, mostly missing or pointing to the wrong documents.
1: no citations, or citations that do not support the statements.`, Inputs: []string{InputQuestion, InputContext, InputAnswer}},
}

// Without an embeddings model, answer_relevancy and answer_similarity are judged on a rubric.
var (
	relevancyJudge = JudgeDef{Metric: score.AnswerRelevancy, Min: 1, Max: 5, Steps: rubricSteps,
		Criteria:  "how directly and fully the ANSWER addresses the QUESTION",
		ScaleText: rubricRelevancy, Inputs: []string{InputHistory, InputQuestion, InputAnswer}}
	similarityJudge = JudgeDef{Metric: score.AnswerSimilarity, Min: 1, Max: 5, Steps: rubricSteps,
		Criteria:  "how closely the ANSWER matches the meaning of the REFERENCE answer",
		ScaleText: rubricSimilarity, Inputs: []string{InputQuestion, InputAnswer, InputReference}}
)

func ratingSchema() Schema {
	return object(map[string]any{"reasoning": str(), "score": integer(1, 5)})
}
