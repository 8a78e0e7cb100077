// Package quality measures how well a faithfulness scorer agrees with human labels on the
// development data in ../shared/data (BEGIN dev, RAGTruth summary): ROC AUC, and precision,
// recall and F1 for "hallucinated" at a threshold. The scorer-quality command and the builtin
// package's regression test share it.
package quality

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Example is one labelled answer: the context it must be faithful to, and whether humans found
// it hallucinated (not fully attributable to the context).
type Example struct {
	Context      string
	Answer       string
	Hallucinated bool
	// Spans are the hallucinated spans of Answer as byte offsets [start, end) when the data
	// labels spans (RAGTruth).
	Spans [][2]int
}

// LoadBEGIN reads begin/<file> (a BEGIN dev TSV): knowledge is the context, response the answer;
// `Fully attributable` is faithful, `Not fully attributable` and `Generic` are not.
func LoadBEGIN(path string) ([]Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var out []Example
	line := 0
	col := map[string]int{}
	for sc.Scan() {
		line++
		fields := strings.Split(strings.TrimRight(sc.Text(), "\r"), "\t")
		if line == 1 {
			for i, name := range fields {
				col[strings.TrimSpace(name)] = i
			}
			for _, need := range []string{"knowledge", "response", "begin_label"} {
				if _, ok := col[need]; !ok {
					return nil, fmt.Errorf("%s: header lacks column %q", path, need)
				}
			}
			continue
		}
		if len(fields) != len(col) {
			return nil, fmt.Errorf("%s:%d: %d fields, want %d", path, line, len(fields), len(col))
		}
		label := strings.TrimSpace(fields[col["begin_label"]])
		switch label {
		case "Fully attributable", "Not fully attributable", "Generic":
		default:
			return nil, fmt.Errorf("%s:%d: unknown label %q", path, line, label)
		}
		out = append(out, Example{
			Context:      fields[col["knowledge"]],
			Answer:       fields[col["response"]],
			Hallucinated: label != "Fully attributable",
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// LoadRAGTruth reads ragtruth_summary.jsonl: each response is an answer to its source; it is
// hallucinated when one of its labels has implicit_true false.
func LoadRAGTruth(path string) ([]Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	var out []Example
	for n := 1; ; n++ {
		var item struct {
			Source    string `json:"source"`
			Responses []struct {
				Response string `json:"response"`
				Labels   []struct {
					Start        int  `json:"start"`
					End          int  `json:"end"`
					ImplicitTrue bool `json:"implicit_true"`
				} `json:"labels"`
			} `json:"responses"`
		}
		if err := dec.Decode(&item); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: item %d: %w", path, n, err)
		}
		for _, r := range item.Responses {
			ex := Example{Context: item.Source, Answer: r.Response}
			for _, l := range r.Labels {
				if l.ImplicitTrue {
					continue
				}
				ex.Hallucinated = true
				// Offsets count code points (the corpus was made in Python).
				start, end := byteOffset(r.Response, l.Start), byteOffset(r.Response, l.End)
				if start < end {
					ex.Spans = append(ex.Spans, [2]int{start, end})
				}
			}
			out = append(out, ex)
		}
	}
	return out, nil
}

// byteOffset converts a code-point offset into s to a byte offset (clamped to len(s)).
func byteOffset(s string, runes int) int {
	if runes <= 0 {
		return 0
	}
	n := 0
	for i := range s {
		if n == runes {
			return i
		}
		n++
	}
	return len(s)
}

// Claim is one claim of a span-labelled answer: hallucinated when it overlaps a labelled span.
type Claim struct {
	Text         string
	Hallucinated bool
}

// LabelClaims locates each claim in e.Answer (in order, as substrings) and labels it by the
// spans. A claim that cannot be located is labelled by whether the answer has any span and
// counted in missing.
func LabelClaims(e Example, claims []string) (out []Claim, missing int) {
	pos := 0
	for _, c := range claims {
		k := strings.Index(e.Answer[pos:], c)
		if k < 0 {
			missing++
			out = append(out, Claim{Text: c, Hallucinated: e.Hallucinated})
			continue
		}
		start, end := pos+k, pos+k+len(c)
		h := false
		for _, sp := range e.Spans {
			if sp[0] < end && sp[1] > start {
				h = true
			}
		}
		out = append(out, Claim{Text: c, Hallucinated: h})
		pos = end
	}
	return out, missing
}

// Halves splits examples by their context into a development half and a held-out half: an
// example is in the development half when the FNV-1a hash of its context is even. All answers to
// one source passage (one RAGTruth source_id) fall in the same half, so a method developed on
// the first half is measured on passages it never saw.
func Halves(examples []Example) (dev, held []Example) {
	for _, e := range examples {
		if IsDev(e) {
			dev = append(dev, e)
		} else {
			held = append(held, e)
		}
	}
	return dev, held
}

// IsDev reports whether e belongs to the development half (see Halves).
func IsDev(e Example) bool {
	h := fnv.New32a()
	h.Write([]byte(e.Context))
	return h.Sum32()%2 == 0
}

// Split is one named evaluation set.
type Split struct {
	Name     string
	Examples []Example
}

// LoadAll loads the three splits from dir (the shared data directory).
func LoadAll(dir string) ([]Split, error) {
	var out []Split
	for _, s := range []struct{ name, file string }{
		{"begin-wow", "begin/begin_dev_wow.tsv"},
		{"begin-cmu", "begin/begin_dev_cmu.tsv"},
	} {
		ex, err := LoadBEGIN(filepath.Join(dir, s.file))
		if err != nil {
			return nil, err
		}
		out = append(out, Split{Name: s.name, Examples: ex})
	}
	ex, err := LoadRAGTruth(filepath.Join(dir, "ragtruth/ragtruth_summary.jsonl"))
	if err != nil {
		return nil, err
	}
	return append(out, Split{Name: "ragtruth-summary", Examples: ex}), nil
}

// Report holds the agreement of one scorer with the labels of one split.
type Report struct {
	N, Hallucinated int
	// AUC is the ROC AUC of the faithfulness score for telling faithful from hallucinated
	// answers (ties count half): the chance that a random faithful answer scores above a
	// random hallucinated one.
	AUC float64
	// Precision, Recall and F1 are for "hallucinated", predicted when the score is below the
	// threshold.
	Threshold             float64
	TP, FP, FN            int
	Precision, Recall, F1 float64
}

// Evaluate scores every example with score and compares with the labels.
func Evaluate(examples []Example, threshold float64, score func(Example) float64) Report {
	scores := make([]float64, len(examples))
	for i, e := range examples {
		scores[i] = score(e)
	}
	return Compare(examples, scores, threshold)
}

// Compare computes the report for precomputed scores.
func Compare(examples []Example, scores []float64, threshold float64) Report {
	r := Report{N: len(examples), Threshold: threshold}
	faithful := make([]bool, len(examples))
	for i, e := range examples {
		faithful[i] = !e.Hallucinated
		if e.Hallucinated {
			r.Hallucinated++
		}
		pred := scores[i] < threshold
		switch {
		case pred && e.Hallucinated:
			r.TP++
		case pred && !e.Hallucinated:
			r.FP++
		case !pred && e.Hallucinated:
			r.FN++
		}
	}
	r.AUC = ROCAUC(scores, faithful)
	if r.TP+r.FP > 0 {
		r.Precision = float64(r.TP) / float64(r.TP+r.FP)
	}
	if r.TP+r.FN > 0 {
		r.Recall = float64(r.TP) / float64(r.TP+r.FN)
	}
	if r.Precision+r.Recall > 0 {
		r.F1 = 2 * r.Precision * r.Recall / (r.Precision + r.Recall)
	}
	return r
}

// ROCAUC is the area under the ROC curve of scores for telling positives from negatives, by the
// Mann-Whitney statistic with tied scores sharing their average rank. It is 0.5 when either
// class is empty.
func ROCAUC(scores []float64, positive []bool) float64 {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case scores[a] < scores[b]:
			return -1
		case scores[a] > scores[b]:
			return 1
		}
		return 0
	})
	var rankSum float64
	nPos, nNeg := 0, 0
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && (j == i || scores[idx[j]] == scores[idx[i]]) {
			j++
		}
		avg := float64(i+j+1) / 2 // ranks i+1 .. j
		for k := i; k < j; k++ {
			if positive[idx[k]] {
				rankSum += avg
			}
		}
		i = j
	}
	for _, p := range positive {
		if p {
			nPos++
		} else {
			nNeg++
		}
	}
	if nPos == 0 || nNeg == 0 {
		return 0.5
	}
	return (rankSum - float64(nPos)*float64(nPos+1)/2) / (float64(nPos) * float64(nNeg))
}

// Interval is a two-sided bootstrap confidence interval.
type Interval struct{ Lo, Hi float64 }

// BootstrapAUC resamples the examples with replacement (a fixed seed, so runs agree) and returns
// the 95% percentile intervals of the ROC AUC of a and of b, and of the paired difference
// AUC(a) − AUC(b): when that interval excludes 0, a separates the labels better than b beyond
// sampling noise.
func BootstrapAUC(examples []Example, a, b []float64, resamples int, seed uint64) (ia, ib, diff Interval) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := len(examples)
	ra, rb, rd := make([]float64, 0, resamples), make([]float64, 0, resamples), make([]float64, 0, resamples)
	sa, sb, pos := make([]float64, n), make([]float64, n), make([]bool, n)
	for range resamples {
		for i := range n {
			k := rng.IntN(n)
			sa[i], sb[i], pos[i] = a[k], b[k], !examples[k].Hallucinated
		}
		x, y := ROCAUC(sa, pos), ROCAUC(sb, pos)
		ra, rb, rd = append(ra, x), append(rb, y), append(rd, x-y)
	}
	return percentiles(ra), percentiles(rb), percentiles(rd)
}

func percentiles(v []float64) Interval {
	if len(v) == 0 {
		return Interval{}
	}
	slices.Sort(v)
	at := func(q float64) float64 { return v[min(len(v)-1, int(q*float64(len(v))))] }
	return Interval{Lo: at(0.025), Hi: at(0.975)}
}

// DecisionAgreement is the accuracy and macro-F1 (the mean of the F1 of "supported" and of
// "not supported") of the decision score >= threshold against the labels.
func DecisionAgreement(ex []Example, scores []float64, threshold float64) (accuracy, macroF1 float64) {
	var tp, fp, fn, tn float64 // positive: supported (not hallucinated)
	for i, e := range ex {
		pred, pos := scores[i] >= threshold, !e.Hallucinated
		switch {
		case pred && pos:
			tp++
		case pred && !pos:
			fp++
		case !pred && pos:
			fn++
		default:
			tn++
		}
	}
	f1 := func(tp, fp, fn float64) float64 {
		if 2*tp+fp+fn == 0 {
			return 0
		}
		return 2 * tp / (2*tp + fp + fn)
	}
	n := tp + fp + fn + tn
	if n == 0 {
		return 0, 0
	}
	return (tp + tn) / n, (f1(tp, fp, fn) + f1(tn, fn, fp)) / 2
}
