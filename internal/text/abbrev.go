package text

// abbrevKind says what a full stop after a known abbreviation means.
type abbrevKind uint8

const (
	// continues: the stop never ends a sentence; a title is followed by what it introduces
	// (Dr. Smith, e.g. tea, vs. them).
	continues abbrevKind = iota + 1
	// numbering: a reference word continues before a number or a lower-case word (No. 5,
	// Fig. 3, approx. five) and ends a sentence otherwise ("The answer is no. It closed.").
	numbering
	// ambiguous: the word often ends a sentence too (Acme Inc., at 9 am., and so on etc.); the
	// stop ends one only when a sentence opener follows ("... Acme Inc. The firm grew.").
	ambiguous
)

// abbreviations is the one abbreviation list, in lower case without the final full stop.
// Dotted abbreviations not listed here (U.S., Ph.D.) are ambiguous by shape: see isDotted.
var abbreviations = func() map[string]abbrevKind {
	m := map[string]abbrevKind{}
	for _, w := range []string{
		"mr", "mrs", "ms", "dr", "prof", "sen", "rep", "gov", "gen", "lt", "col", "capt", "sgt",
		"rev", "st", "mt", "ft", "hon", "pres", "messrs", "mme", "mlle", "vs", "v", "dept", "cf",
		"al", "e.g", "i.e",
	} {
		m[w] = continues
	}
	for _, w := range []string{"no", "nos", "vol", "fig", "pp", "approx", "ca", "est"} {
		m[w] = numbering
	}
	for _, w := range []string{
		"inc", "ltd", "co", "corp", "jr", "sr", "etc", "bros", "llc", "plc", "jan", "feb", "mar",
		"apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "a.m", "p.m", "am", "pm",
	} {
		m[w] = ambiguous
	}
	return m
}()

// sentenceOpeners are words that, capitalised after an ambiguous abbreviation, start a new
// sentence ("... Acme Inc. The firm grew.").
var sentenceOpeners = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range []string{
		"the", "a", "an", "it", "he", "she", "they", "we", "i", "this", "these", "those", "there",
		"his", "her", "their", "its", "but", "however", "also", "meanwhile", "according", "you",
		"our", "my", "then", "yet",
	} {
		m[w] = true
	}
	return m
}()

// lookup returns the kind of the abbreviation word (any case), or 0. It does not allocate.
func lookup(word string) abbrevKind {
	var buf [8]byte
	lower, ok := asciiLower(buf[:0], word)
	if !ok {
		return 0
	}
	return abbreviations[string(lower)]
}

// isOpener reports whether word (any case) is a sentence opener. It does not allocate.
func isOpener(word string) bool {
	var buf [16]byte
	lower, ok := asciiLower(buf[:0], word)
	return ok && sentenceOpeners[string(lower)]
}

// asciiLower appends word in lower case to buf; ok is false when word is not ASCII or does not
// fit buf's capacity (no listed word does).
func asciiLower(buf []byte, word string) ([]byte, bool) {
	if len(word) > cap(buf) {
		return nil, false
	}
	for i := 0; i < len(word); i++ {
		c := word[i]
		if c >= 0x80 {
			return nil, false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return buf, true
}

// isDotted reports whether word is a dotted abbreviation such as U.S, e.g or Ph.D (the final
// stop already cut off): letters in pieces of at most three, joined by full stops. A domain
// name (example.com) or a decimal (3.5) is not one.
func isDotted(word string) bool {
	dots, run := 0, 0
	for i := 0; i < len(word); i++ {
		c := word[i]
		switch {
		case c == '.':
			if run == 0 {
				return false
			}
			dots, run = dots+1, 0
		case ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z'):
			run++
			if run > 3 {
				return false
			}
		default:
			return false
		}
	}
	return dots > 0 && run > 0
}
