package trec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Qrels are relevance grades by query id, then document id. A grade of 1 or more is relevant
// (trec_eval's default relevance level); 0 and negative grades are judged not relevant.
type Qrels map[string]map[string]int

// Run holds a system's retrieval scores by query id, then document id. The order the file gave
// (and a TREC run's rank column) is ignored: Ranking orders by score as trec_eval does.
type Run map[string]map[string]float64

// Format names what a file was detected as.
type Format string

// The formats ReadQrels and ReadRun detect.
const (
	FormatBEIRQrels Format = "beir-qrels" // TSV, header `query-id corpus-id score`
	FormatTRECQrels Format = "trec-qrels" // `qid iter docid grade`
	FormatTRECRun   Format = "trec-run"   // `qid Q0 docid rank score tag`
	FormatBEIRRun   Format = "beir-json"  // {"qid": {"docid": score}}
)

// MaxFileBytes bounds a qrels or run file read into memory.
const MaxFileBytes = 1 << 30

// LineError is a malformed input line: the file's name, the 1-based line and what is wrong.
type LineError struct {
	File   string
	Line   int
	Reason string
}

func (e *LineError) Error() string {
	return fmt.Sprintf("%s: line %d: %s", e.File, e.Line, e.Reason)
}

// ReadQrels reads BEIR qrels (a TSV whose first line is the header `query-id corpus-id score`)
// or TREC qrels (`qid iter docid grade`, blank lines and `#` comments skipped), detected from
// the first line. name labels errors. A document judged twice for a query is an error, as in
// trec_eval.
func ReadQrels(r io.Reader, name string) (Qrels, Format, error) {
	q := Qrels{}
	var format Format
	err := eachLine(r, name, func(n int, line string) error {
		f := strings.Fields(line)
		if format == "" {
			if len(f) == 3 && f[0] == "query-id" && f[1] == "corpus-id" && f[2] == "score" {
				format = FormatBEIRQrels
				return nil
			}
			if len(f) != 4 {
				return &LineError{name, n, fmt.Sprintf("neither BEIR qrels (header `query-id corpus-id score`) nor TREC qrels (`qid iter docid grade`): %d fields", len(f))}
			}
			format = FormatTRECQrels
		}
		var qid, doc, grade string
		switch {
		case format == FormatBEIRQrels && len(f) == 3:
			qid, doc, grade = f[0], f[1], f[2]
		case format == FormatTRECQrels && len(f) == 4:
			qid, doc, grade = f[0], f[2], f[3]
		case format == FormatBEIRQrels:
			return &LineError{name, n, fmt.Sprintf("BEIR qrels line has %d fields, want 3 (query-id corpus-id score)", len(f))}
		default:
			return &LineError{name, n, fmt.Sprintf("TREC qrels line has %d fields, want 4 (qid iter docid grade)", len(f))}
		}
		g, err := strconv.Atoi(grade)
		if err != nil {
			return &LineError{name, n, fmt.Sprintf("grade %q is not an integer", clip(grade))}
		}
		if q[qid] == nil {
			q[qid] = map[string]int{}
		}
		if _, dup := q[qid][doc]; dup {
			return &LineError{name, n, fmt.Sprintf("document %q judged twice for query %q", clip(doc), clip(qid))}
		}
		q[qid][doc] = g
		return nil
	})
	if err != nil {
		return nil, format, err
	}
	if len(q) == 0 {
		return nil, format, fmt.Errorf("%s: no judgements", name)
	}
	return q, format, nil
}

// ReadRun reads a TREC run (`qid Q0 docid rank score tag`) or BEIR results JSON
// (`{"qid": {"docid": score}}`), detected from the first non-blank byte. A document listed
// twice for a query is an error, as in trec_eval.
func ReadRun(r io.Reader, name string) (Run, Format, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > MaxFileBytes {
		return nil, "", fmt.Errorf("%s: larger than %d bytes", name, MaxFileBytes)
	}
	if t := bytes.TrimLeft(data, " \t\r\n\ufeff"); len(t) > 0 && t[0] == '{' {
		run, err := readBEIRRun(data, name)
		return run, FormatBEIRRun, err
	}
	run := Run{}
	err = eachLine(bytes.NewReader(data), name, func(n int, line string) error {
		f := strings.Fields(line)
		if len(f) != 6 {
			return &LineError{name, n, fmt.Sprintf("neither a TREC run line (`qid Q0 docid rank score tag`, got %d fields) nor BEIR results JSON", len(f))}
		}
		s, err := strconv.ParseFloat(f[4], 64)
		if err != nil || math.IsNaN(s) {
			return &LineError{name, n, fmt.Sprintf("score %q is not a number", clip(f[4]))}
		}
		return run.add(f[0], f[2], s, name, n)
	})
	if err != nil {
		return nil, FormatTRECRun, err
	}
	if len(run) == 0 {
		return nil, FormatTRECRun, fmt.Errorf("%s: no results", name)
	}
	return run, FormatTRECRun, nil
}

func (run Run) add(qid, doc string, s float64, name string, line int) error {
	if run[qid] == nil {
		run[qid] = map[string]float64{}
	}
	if _, dup := run[qid][doc]; dup {
		return &LineError{name, line, fmt.Sprintf("document %q listed twice for query %q", clip(doc), clip(qid))}
	}
	run[qid][doc] = s
	return nil
}

// readBEIRRun walks the JSON token by token so that an error and a repeated document name
// their line (a map decode would keep the last duplicate silently).
func readBEIRRun(data []byte, name string) (Run, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	lineAt := func() int { return 1 + bytes.Count(data[:dec.InputOffset()], []byte{'\n'}) }
	bad := func(reason string) error { return &LineError{name, lineAt(), reason} }
	badJSON := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected end of JSON") {
			// The last line that holds anything is where the file stops short.
			return &LineError{name, 1 + bytes.Count(bytes.TrimRight(data, " \t\r\n"), []byte{'\n'}), "unexpected end of JSON"}
		}
		return bad("invalid JSON: " + err.Error())
	}
	delim := func(want json.Delim, what string) error {
		tok, err := dec.Token()
		if err != nil {
			return badJSON(err)
		}
		if d, ok := tok.(json.Delim); !ok || d != want {
			return bad(fmt.Sprintf("want %s, got %v", what, tokenText(tok)))
		}
		return nil
	}
	key := func() (string, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", badJSON(err)
		}
		s, ok := tok.(string)
		if !ok {
			return "", bad(fmt.Sprintf("want a string key, got %v", tokenText(tok)))
		}
		return s, nil
	}
	run := Run{}
	if err := delim('{', "an object {\"qid\": {\"docid\": score}}"); err != nil {
		return nil, err
	}
	for dec.More() {
		qid, err := key()
		if err != nil {
			return nil, err
		}
		if err := delim('{', fmt.Sprintf("an object of document scores for query %q", clip(qid))); err != nil {
			return nil, err
		}
		if run[qid] == nil {
			run[qid] = map[string]float64{}
		}
		for dec.More() {
			doc, err := key()
			if err != nil {
				return nil, err
			}
			tok, err := dec.Token()
			if err != nil {
				return nil, badJSON(err)
			}
			num, ok := tok.(json.Number)
			if !ok {
				return nil, bad(fmt.Sprintf("score of %q for query %q is %v, want a number", clip(doc), clip(qid), tokenText(tok)))
			}
			s, err := num.Float64()
			if err != nil {
				return nil, bad(fmt.Sprintf("score %q is out of range", clip(num.String())))
			}
			if err := run.add(qid, doc, s, name, lineAt()); err != nil {
				return nil, err
			}
		}
		if err := delim('}', "the end of the query's object"); err != nil {
			return nil, err
		}
	}
	if err := delim('}', "the end of the results object"); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, bad("data after the results object")
	}
	if len(run) == 0 {
		return nil, fmt.Errorf("%s: no results", name)
	}
	return run, nil
}

func tokenText(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", v.String())
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// eachLine calls fn with each non-blank line that is not a `#` comment and its 1-based number.
func eachLine(r io.Reader, name string, fn func(n int, line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(strings.TrimPrefix(sc.Text(), "\ufeff"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: line %d: %w", name, n+1, err)
	}
	return nil
}

// clip keeps an echoed input value short in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Ranking returns the query's documents in trec_eval's order: score descending, ties broken
// by document id descending (byte order). The run file's rank column plays no part.
func (run Run) Ranking(qid string) []string {
	docs := run[qid]
	out := make([]string, 0, len(docs))
	for d := range docs {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		si, sj := docs[out[i]], docs[out[j]]
		if si != sj {
			return si > sj
		}
		return out[i] > out[j]
	})
	return out
}
