package text

import (
	"strings"
	"unicode/utf8"

	"github.com/ragwatch/ragwatch/internal/truncate"
)

// A refusal is an answer that declines to answer because the application does not have the
// information: "I don't know", "the documents do not say", "I couldn't find ...". IsRefusal
// looks for one of refusalPhrases in the answer's first two sentences, in first person or about
// the sources, and rejects the uses that are not refusals:
//   - a phrase followed by a word in notRefusalAfter ("I don't know why you'd wait — refunds
//     take 5 days", "I don't know of a faster way than ...");
//   - a phrase whose sentence goes on with " but " ("I couldn't find the exact date, but the
//     launch was in March"): a partial answer is judged as an answer.
//
// The rule is deliberately narrow: a false refusal hides a bad answer from answer_relevancy,
// a missed one only scores a refusal like any other answer.

// refusalPhrases are matched on the lower-cased sentence with apostrophes made ASCII.
var refusalPhrases = []string{
	"i don't know", "i do not know", "i dont know",
	"i'm not sure", "i am not sure",
	"i couldn't find", "i could not find", "i can't find", "i cannot find", "i can not find",
	"i was unable to find", "i was not able to find", "i wasn't able to find", "i'm unable to find", "i am unable to find",
	"i don't have the answer", "i do not have the answer", "i don't have an answer",
	"i don't have information", "i do not have information", "i don't have any information", "i do not have any information",
	"i don't have specific information", "i do not have specific information", "i don't have enough information",
	"i do not have enough information", "i don't have access to", "i do not have access to",
	"i'm unable to answer", "i am unable to answer", "i cannot answer", "i can't answer", "i'm not able to answer",
	"i am not able to answer", "unable to provide an answer", "i cannot provide an answer", "i can't provide an answer",
	"there is no information", "there's no information", "there is no mention", "there's no mention",
	"no information is available", "no information available", "no relevant information",
	"the documents do not", "the documents don't", "the document does not", "the document doesn't",
	"the context does not", "the context doesn't", "the provided context does not", "the provided context doesn't",
	"the provided documents do not", "the provided documents don't", "the passages do not", "the passages don't",
	"the sources do not", "the sources don't", "the provided information does not", "the provided information doesn't",
	"the information provided does not", "the information provided doesn't", "the given context does not",
	"is not mentioned in the", "isn't mentioned in the", "is not provided in the", "isn't provided in the",
	"is not specified in the", "isn't specified in the", "not covered in the", "not available in the",
	"does not contain information", "doesn't contain information", "do not contain information", "don't contain information",
	"does not contain any information", "doesn't contain any information", "do not contain any information",
	"does not mention", "doesn't mention", "do not mention", "don't mention",
	"does not say", "doesn't say", "do not say", "don't say",
	"does not specify", "doesn't specify", "do not specify", "don't specify",
	"does not provide", "doesn't provide", "do not provide", "don't provide",
}

// sourceWords must come before a phrase that is about something's content ("does not say"),
// so that "the router does not say hello" is not a refusal but "the documents do not say" is.
var sourceWords = []string{"document", "context", "passage", "source", "information", "text", "knowledge base", "article", "page", "manual", "record"}

// notRefusalAfter are the words that, right after an "I don't know" phrase, make it
// something else.
var notRefusalAfter = []string{"why", "of", "whether you", "if you", "about you", "how you", "what you", "which you"}

// absenceAfter are the words one of the "there is no information" phrases must be followed by
// (or the sentence must end): "there is no information loss" is not a refusal.
var absenceAfter = []string{"about", "on", "regarding", "concerning", "in", "for", "of", "available", "that", "to", "given", "was", "is", "provided", "related"}

// IsRefusal reports whether answer declines to answer for lack of information. It runs on
// every record (ragwatch_refusals_total), so it reads at most refusalScan bytes, and only
// answers holding a negation anchor (hasNegationAnchor) are matched phrase by phrase.
func IsRefusal(answer string) bool {
	answer = truncate.String(answer, refusalScan)
	return hasNegationAnchor(answer) && refusalIn(answer)
}

// refusalIn reports whether one of the first two sentences of answer is a refusal: the whole
// match, which IsRefusal spares answers without a negation anchor.
func refusalIn(answer string) bool {
	var buf [8]string
	ss := AppendSentences(buf[:0], answer)
	if len(ss) > 2 {
		ss = ss[:2]
	}
	for _, s := range ss {
		if refusalSentence(normalizeRefusal(s)) {
			return true
		}
	}
	return false
}

// refusalScan bounds the bytes of an answer IsRefusal reads: its first two sentences are in it.
const refusalScan = 600

// hasNegationAnchor reports whether s holds, in any case, "n't" (with any apostrophe
// normalizeRefusal makes ASCII), the word "not" (or "cannot"), the word "no" before a space,
// "dont" or "unable". Every refusal phrase holds one, and holds "not" and "no" only as words: so
// "another", "notifications" or "casino" are not anchors. It does not allocate.
func hasNegationAnchor(s string) bool {
	for i := 0; i+1 < len(s); i++ { // every anchor is longer than a byte
		if !anchorStart[s[i]] {
			continue // one load and a branch that is rarely taken, for most bytes
		}
		// Each anchor by its first two bytes, in either case.
		rest := s[i:]
		switch c, next := rest[0]|0x20, rest[1]|0x20; {
		case c == 'n' && next == 'o':
			if len(rest) > 2 && rest[2]|0x20 == 't' {
				// "not" as a word, or in "cannot"
				if (afterWordBreak(s, i) || (i >= 3 && hasPrefixFold(s[i-3:], "can"))) && (len(rest) == 3 || !isASCIILetter(rest[3])) {
					return true
				}
			} else if afterWordBreak(s, i) && len(rest) > 2 && (asciiSpace[rest[2]] || rest[2] >= utf8.RuneSelf) {
				return true // "no", then white space: normalizeRefusal makes any of it one ASCII space
			}
		case c == 'n' && (rest[1] == '\'' || rest[1] == '`'):
			if len(rest) > 2 && rest[2]|0x20 == 't' {
				return true
			}
		case c == 'n' && rest[1] == 0xE2: // "n’t", "n‘t"
			if hasPrefixFold(rest, "n\u2019t") || hasPrefixFold(rest, "n\u2018t") {
				return true
			}
		case c == 'u' && next == 'n':
			if hasPrefixFold(rest, "unable") {
				return true
			}
		case c == 'd' && next == 'o':
			if hasPrefixFold(rest, "dont") {
				return true
			}
		}
	}
	return false
}

// anchorStart holds the bytes a negation anchor starts with, in either case.
var anchorStart = [256]bool{'n': true, 'N': true, 'u': true, 'U': true, 'd': true, 'D': true}

// afterWordBreak reports whether s[i] is not preceded by an ASCII letter, which normalizeRefusal
// keeps a letter (any other byte may become a space or stay a letter).
func afterWordBreak(s string, i int) bool {
	return i == 0 || !isASCIILetter(s[i-1])
}

func isASCIILetter(c byte) bool {
	c |= 0x20
	return c >= 'a' && c <= 'z'
}

// hasPrefixFold is strings.HasPrefix with ASCII letters compared without case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		a, b := s[i], prefix[i]
		if a >= 'A' && a <= 'Z' {
			a += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// normalizeRefusal lower-cases s, makes apostrophes ASCII and collapses white space. An ASCII
// sentence (most answers) is done in one pass and one allocation; others as
// normalizeRefusalSlow does, which the ASCII pass matches.
func normalizeRefusal(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return normalizeRefusalSlow(s)
		}
	}
	var b strings.Builder
	b.Grow(len(s))
	gap := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case asciiSpace[c]:
			gap = b.Len() > 0
			continue
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c == '`':
			c = '\''
		}
		if gap {
			b.WriteByte(' ')
			gap = false
		}
		b.WriteByte(c)
	}
	return b.String()
}

// asciiSpace holds the ASCII bytes unicode.IsSpace (strings.Fields) splits on.
var asciiSpace = [256]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

func normalizeRefusalSlow(s string) string {
	return strings.Join(strings.Fields(apostrophes.Replace(strings.ToLower(s))), " ")
}

var apostrophes = strings.NewReplacer("\u2019", "'", "\u2018", "'", "`", "'")

// phrasesByWord indexes refusalPhrases by their first word, so a sentence is matched word by
// word instead of phrase by phrase.
var phrasesByWord = func() map[string][]string {
	m := map[string][]string{}
	for _, p := range refusalPhrases {
		w, _, _ := strings.Cut(p, " ")
		m[w] = append(m[w], p)
	}
	return m
}()

func refusalSentence(s string) bool {
	for i := 0; i < len(s); i++ {
		if (i > 0 && isWordByte(s[i-1])) || !isWordByte(s[i]) {
			continue // not a word start: "... ai don't know" is not "i don't know"
		}
		j := i
		for j < len(s) && s[j] != ' ' {
			j++
		}
		for _, p := range phrasesByWord[s[i:j]] {
			if strings.HasPrefix(s[i:], p) && refusalAt(s, i, p) {
				return true
			}
		}
	}
	return false
}

// refusalAt reports whether phrase p, found at s[i:], makes the sentence a refusal.
func refusalAt(s string, i int, p string) bool {
	rest := s[i+len(p):]
	if len(rest) > 0 && isWordByte(rest[0]) {
		return false // "i don't knowingly"
	}
	rest = strings.TrimLeft(rest, " ,")
	if strings.Contains(p, "know") && followedBy(rest, notRefusalAfter) {
		return false
	}
	if strings.HasPrefix(p, "there") || strings.HasPrefix(p, "no ") {
		if rest != "" && isWordByte(rest[0]) && !followedBy(rest, absenceAfter) {
			return false
		}
	}
	if !strings.HasPrefix(p, "i") && !strings.HasPrefix(p, "the ") && !strings.HasPrefix(p, "there") &&
		!strings.HasPrefix(p, "no ") && !strings.Contains(p, "mentioned") && !aboutSource(s[:i]) {
		return false // "the router does not say hello"
	}
	return !strings.Contains(rest, " but ") && !strings.HasPrefix(rest, "but ")
}

// aboutSource reports whether the words before a phrase name a source ("the documents", "the
// provided context") as its subject.
func aboutSource(before string) bool {
	before = strings.TrimSpace(before)
	if k := strings.LastIndexAny(before, ",;:"); k >= 0 {
		before = before[k+1:]
	}
	for _, w := range sourceWords {
		if strings.Contains(before, w) {
			return true
		}
	}
	return strings.HasSuffix(before, " it") || before == "it" || before == "they" || strings.HasSuffix(before, " they")
}

func followedBy(rest string, words []string) bool {
	for _, w := range words {
		if strings.HasPrefix(rest, w) && (len(rest) == len(w) || !isWordByte(rest[len(w)])) {
			return true
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}
