package builtin

import (
	"iter"
	"strings"
	"unicode"
	"unicode/utf8"
)

// token is one word of a text, normalised for matching.
type token struct {
	norm string // lower case; numbers without thousands separators; number words as digits
	stem string // light suffix stripping of norm (numbers are their own stem)
	num  bool   // holds a digit (3.5, 1600, 1990s, 3rd) or was a number word
	cap  bool   // capitalised inside a sentence, or an acronym: a named-entity hint
	stop bool   // function word: carries no content for support
	neg  bool   // negation cue (not, no, never, n't, without ...)
	meta bool   // refers to the answer or its sources (summary, article): see metaWords
}

// lexEntry is what the word lists say about one lower-case word; lexicon merges them so that
// tokenizing looks a word up once.
type lexEntry struct {
	stop, neg, meta bool
	number          string
}

var lexicon = func() map[string]lexEntry {
	m := map[string]lexEntry{}
	for w := range stopwords {
		e := m[w]
		e.stop = true
		m[w] = e
	}
	for w := range negations {
		e := m[w]
		e.neg = true
		m[w] = e
	}
	for w := range metaWords {
		e := m[w]
		e.meta = true
		m[w] = e
	}
	for w, d := range numberWords {
		m[w] = lexEntry{number: d}
	}
	return m
}()

// tokenize splits text into tokens. The first word of the text is not marked capitalised (it
// starts a sentence) unless it is an acronym.
func tokenize(text string) []token {
	return appendTokens(make([]token, 0, len(text)/6+1), text)
}

// appendTokens appends the tokens of text to out (tokenize, into a buffer the caller reuses).
func appendTokens(out []token, text string) []token {
	first := true
	for word := range rawWords(text) {
		out = appendWord(out, word, first)
		first = false
	}
	return out
}

// eachToken yields the tokens of text in order: tokenize for a caller that reads each token
// once, without building the slice.
func eachToken(text string) iter.Seq[token] {
	return func(yield func(token) bool) {
		var buf [2]token // appendWord makes at most two tokens of a word
		first := true
		for word := range rawWords(text) {
			for _, t := range appendWord(buf[:0], word, first) {
				if !yield(t) {
					return
				}
			}
			first = false
		}
	}
}

// rawWords yields the words of text as they are written, before normalisation: runs of letters
// and digits, keeping dotted abbreviations (U.S.), numbers (3.5, 1,600) and contractions (don't)
// together.
func rawWords(text string) iter.Seq[string] {
	return func(yield func(string) bool) {
		i := 0
		for i < len(text) {
			r, size := decodeRune(text, i)
			if !isWordRune(r) {
				i += size
				continue
			}
			start := i
			j := i
			for j < len(text) {
				r, size := decodeRune(text, j)
				if isWordRune(r) {
					j += size
					continue
				}
				// Keep dotted abbreviations together: U.S., e.g.
				if r == '.' && j+1 < len(text) && isASCIILetter(text[j+1]) && isASCIILetter(text[j-1]) &&
					(j-1 == start || text[j-2] == '.') && (j+2 == len(text) || !isASCIILetter(text[j+2])) {
					j += size
					continue
				}
				// Keep 3.5 and 1,600 together, and don't / company's.
				if (r == '.' || r == ',') && j+1 < len(text) && isDigitByte(text[j+1]) && j > start && isDigitByte(text[j-1]) {
					j += size
					continue
				}
				if (r == '\'' || r == '’') && j+size < len(text) && j > start {
					if n, _ := utf8.DecodeRuneInString(text[j+size:]); unicode.IsLetter(n) {
						j += size
						continue
					}
				}
				break
			}
			i = j
			if !yield(text[start:j]) {
				return
			}
		}
	}
}

// decodeRune is utf8.DecodeRuneInString(s[i:]) with a fast path for ASCII, most of any text.
func decodeRune(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiWord[r]
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// asciiWord is isWordRune for ASCII, as a table.
var asciiWord = func() (t [utf8.RuneSelf]bool) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = unicode.IsLetter(r) || unicode.IsDigit(r)
	}
	return t
}()

func isDigitByte(b byte) bool { return b >= '0' && b <= '9' }

func isASCIILetter(b byte) bool { return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') }

// appendWord normalises one raw word and appends its token(s).
func appendWord(out []token, word string, sentenceStart bool) []token {
	word = strings.ReplaceAll(word, "’", "'")
	lower := strings.ToLower(word)
	// Contractions: "don't" → do + not; "company's" → company.
	if strings.HasSuffix(lower, "n't") {
		base := lower[:len(lower)-3]
		switch base {
		case "ca", "can":
			base = "can"
		case "wo":
			base = "will"
		}
		if base != "" {
			out = append(out, token{norm: base, stem: base, stop: true})
		}
		return append(out, token{norm: "not", stem: "not", stop: true, neg: true})
	}
	if k := strings.IndexByte(lower, '\''); k >= 0 {
		lower = lower[:k]
		word = word[:k]
		if lower == "" {
			return out
		}
	}
	t := token{norm: lower}
	hasDigit := false
	for k := 0; k < len(lower); k++ {
		if isDigitByte(lower[k]) {
			hasDigit = true
			break
		}
	}
	switch {
	case strings.Contains(lower, ".") && !hasDigit: // U.S, e.g
		t.stem = lower
		t.stop = stopwords[lower]
		t.cap = !t.stop && isUpperASCII(word[0])
	case hasDigit:
		t.num = true
		t.norm = strings.ReplaceAll(lower, ",", "")
		t.stem = t.norm
	default:
		e := lexicon[lower]
		if e.number != "" {
			t.num = true
			t.norm = e.number
			t.stem = e.number
			break
		}
		t.stop, t.neg, t.meta = e.stop, e.neg, e.meta
		t.stem = stem(lower)
		r, _ := utf8.DecodeRuneInString(word)
		if unicode.IsUpper(r) && !t.stop && (!sentenceStart || isAcronym(word)) {
			t.cap = true
		}
	}
	return append(out, t)
}

func isUpperASCII(b byte) bool { return b >= 'A' && b <= 'Z' }

func isAcronym(w string) bool {
	if utf8.RuneCountInString(w) < 2 {
		return false
	}
	for _, r := range w {
		if !unicode.IsUpper(r) && !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// stem strips common English inflectional and derivational suffixes so that "contaminated",
// "contamination" and "contaminate" meet. It is deliberately light: over-stemming merges
// unrelated words and makes unsupported claims look supported.
func stem(w string) string {
	if len(w) <= 3 {
		return w
	}
	for _, s := range suffixesByLast[w[len(w)-1]] {
		if strings.HasSuffix(w, s.from) && len(w)-len(s.from)+len(s.to) >= s.min {
			w = w[:len(w)-len(s.from)] + s.to
			break
		}
	}
	if strings.HasSuffix(w, "e") && len(w) > 4 {
		w = w[:len(w)-1]
	}
	// stopped → stopp → stop
	if n := len(w); n > 4 && w[n-1] == w[n-2] && !strings.ContainsRune("aeioulsz", rune(w[n-1])) {
		w = w[:n-1]
	}
	return w
}

type suffix struct {
	from, to string
	min      int // shortest stem left
}

var suffixes = []suffix{
	{"ational", "ate", 4}, {"ization", "ize", 4}, {"fulness", "ful", 4}, {"iveness", "ive", 4},
	{"ations", "ate", 4}, {"ation", "ate", 4}, {"ments", "", 4}, {"ment", "", 4},
	{"nesses", "", 4}, {"ness", "", 4}, {"ities", "", 4}, {"ity", "", 4},
	{"ingly", "", 4}, {"edly", "", 4}, {"ings", "", 3}, {"ing", "", 3},
	{"ies", "y", 3}, {"ied", "y", 3}, {"sses", "ss", 3},
	{"ches", "ch", 3}, {"shes", "sh", 3}, {"xes", "x", 3}, {"zes", "z", 3},
	{"ed", "", 3}, {"ly", "", 4}, {"ss", "ss", 3}, {"us", "us", 3}, {"is", "is", 3}, {"s", "", 3},
}

// suffixesByLast indexes suffixes by their last byte, keeping their order.
var suffixesByLast = func() map[byte][]suffix {
	m := map[byte][]suffix{}
	for _, s := range suffixes {
		m[s.from[len(s.from)-1]] = append(m[s.from[len(s.from)-1]], s)
	}
	return m
}()

var numberWords = map[string]string{
	"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
	"seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
	"thirteen": "13", "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17",
	"eighteen": "18", "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40",
	"fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90",
	"hundred": "100", "thousand": "1000",
	"first": "1st", "second": "2nd", "third": "3rd", "fourth": "4th", "fifth": "5th",
	"sixth": "6th", "seventh": "7th", "eighth": "8th", "ninth": "9th", "tenth": "10th",
	"once": "1x", "twice": "2x", "single": "1", "dozen": "12", "half": "0.5",
}

var negations = set("not", "no", "never", "none", "nobody", "nothing", "neither", "nor",
	"nowhere", "cannot", "without", "lack", "lacks", "lacked", "lacking", "fail", "fails",
	"failed", "deny", "denies", "denied", "refuse", "refused", "refuses")

// stopwords are function words and discourse fillers; they carry no content for support.
// Modals (may, could, should) and first/second person (I, you, we) are deliberately not here:
// "the case could be reopened" or "I love that film" claim more than a passage that lacks them.
var stopwords = set(
	"a", "about", "above", "after", "again", "against", "all", "also", "although", "am", "an",
	"and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below",
	"between", "both", "but", "by", "can", "did", "do", "does", "doing", "down",
	"during", "each", "either", "else", "etc", "even", "ever", "every", "few", "for", "from",
	"further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him",
	"himself", "his", "how", "however", "if", "in", "into", "is", "it", "its", "itself",
	"just", "let", "more", "most", "much", "myself",
	"of", "off", "on", "only", "or", "other", "others", "ours", "ourselves", "out",
	"over", "own", "per", "quite", "rather", "really", "same", "shall", "she", "so",
	"some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then",
	"there", "these", "they", "this", "those", "though", "through", "thus", "to", "too",
	"under", "until", "up", "upon", "very", "was", "were", "what", "when", "where",
	"whether", "which", "while", "who", "whom", "whose", "why", "will", "with", "within",
	"yes", "yet", "yours", "e.g", "i.e", "vs", "cf", "yourself", "yourselves", "oh", "well",
	"like", "think", "know", "sure", "okay", "ok", "yeah", "lot", "lots", "get", "got",
	"thing", "things", "something", "anything", "everything", "one's", "said", "says", "say",
	"according", "including", "additionally", "furthermore", "moreover", "overall", "already",
	"still", "many", "several", "various", "often", "usually", "actually", "indeed",
	"not", "no", "never", "none", "nor", "neither", "cannot", "without", "nothing", "nobody",
	"nowhere", "less", "fewer", "due", "despite", "since", "across", "behind", "beyond",
	"amid", "among", "amongst", "around", "toward", "towards", "via", "onto", "along",
	"alongside", "throughout", "whereas", "whilst", "unless", "nevertheless", "nonetheless",
	"therefore", "hence", "instead", "otherwise", "besides", "almost", "nearly", "perhaps",
	"currently", "recently", "later", "now", "soon", "ago", "whose", "whatever", "whoever",
	"whenever", "wherever", "another", "anyone", "everyone", "someone", "somebody", "anybody",
	"everybody", "enough", "either", "neither", "certain", "particularly", "especially",
	"specifically", "generally", "simply", "mainly", "mostly", "largely", "finally", "also",
)

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// antonyms are contradiction hints: a claim that says "increased" where its best passage says
// "decreased" (and not "increased") is likely in conflict with it. Keys and values are stems.
var antonyms = func() map[string][]string {
	pairs := [][2]string{
		{"increase", "decrease"}, {"rise", "fall"}, {"rose", "fell"}, {"raise", "lower"},
		{"higher", "lower"}, {"more", "less"}, {"above", "below"}, {"before", "after"},
		{"earlier", "later"}, {"first", "last"}, {"win", "lose"}, {"won", "lost"},
		{"accept", "reject"}, {"allow", "forbid"}, {"allow", "ban"}, {"open", "close"},
		{"true", "false"}, {"success", "failure"}, {"alive", "dead"}, {"live", "die"},
		{"guilty", "innocent"}, {"legal", "illegal"}, {"male", "female"}, {"man", "woman"},
		{"husband", "wife"}, {"minimum", "maximum"}, {"positive", "negative"},
		{"approve", "reject"}, {"buy", "sell"}, {"gain", "loss"}, {"start", "end"},
		{"begin", "end"}, {"largest", "smallest"}, {"oldest", "youngest"}, {"best", "worst"},
		{"north", "south"}, {"east", "west"}, {"import", "export"}, {"strong", "weak"},
		{"agree", "disagree"}, {"support", "oppose"}, {"confirm", "deny"}, {"arrive", "depart"},
		{"always", "never"}, {"all", "none"}, {"include", "exclude"}, {"easy", "difficult"},
		{"private", "public"}, {"cheap", "expensive"}, {"young", "old"}, {"new", "old"},
	}
	m := map[string][]string{}
	for _, p := range pairs {
		a, b := stem(p[0]), stem(p[1])
		m[a] = append(m[a], b)
		m[b] = append(m[b], a)
	}
	return m
}()
