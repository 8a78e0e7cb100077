package generate

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/truncate"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// Kinds of generated items (the record's attributes["synthetic.kind"]).
const (
	KindSingle       = "single_doc"
	KindMulti        = "multi_doc"
	KindUnanswerable = "unanswerable"
)

// Refusal is the reference answer of an unanswerable item.
const Refusal = "The documents do not contain the answer to this question."

// Doc is one distinct document retrieved by traffic.
type Doc struct {
	ID      string
	Content string
	// With are the ids of documents retrieved together with this one (candidates for a
	// two-document question), in first-seen order.
	With []string
}

// Documents collects the distinct documents of records (one JSON record per line, as `ragwatch
// export` writes them): a document is kept once by id, and a second id with the same content
// (after folding case and spaces) is dropped as a duplicate. Lines that are not records are
// returned as "line N: problem" and skipped.
func Documents(r io.Reader, maxDocBytes int) (docs []Doc, bad []string, err error) {
	byID := map[string]int{}
	byContent := map[string]string{}
	br := bufio.NewReaderSize(r, 1<<20)
	for n := 1; ; n++ {
		line, rerr := br.ReadString('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, nil, fmt.Errorf("read input at line %d: %w", n, rerr)
		}
		if strings.TrimSpace(line) != "" {
			var rec record.Record
			if jerr := json.Unmarshal([]byte(line), &rec); jerr != nil {
				bad = append(bad, fmt.Sprintf("line %d: invalid JSON: %v", n, jerr))
			} else {
				var ids []string
				for _, d := range rec.Documents {
					if strings.TrimSpace(d.Content) == "" || d.ID == "" {
						continue
					}
					key := fold(d.Content)
					if id, dup := byContent[key]; dup {
						ids = append(ids, id)
						continue
					}
					if _, seen := byID[d.ID]; !seen {
						byID[d.ID] = len(docs)
						byContent[key] = d.ID
						docs = append(docs, Doc{ID: d.ID, Content: truncate.String(d.Content, maxDocBytes)})
					}
					ids = append(ids, d.ID)
				}
				for _, a := range ids {
					for _, b := range ids {
						if a != b && !contains(docs[byID[a]].With, b) {
							docs[byID[a]].With = append(docs[byID[a]].With, b)
						}
					}
				}
			}
		}
		if errors.Is(rerr, io.EOF) {
			return docs, bad, nil
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// fold is the form two texts are compared in for duplicates: lower case, letters and digits
// only, single spaces.
func fold(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }), " ")
}

// Budget is what the calls are charged to (decide.Budget).
type Budget interface {
	Allow(feedback bool) bool
	Charge(model string, inputTokens, outputTokens int64, reportedUSD float64) float64
}

// Options configures Generate.
type Options struct {
	Judge *llm.Judge // the LLM backend; it redacts every prompt
	// Size is how many items to write; Mix the shares of single-document, two-document and
	// unanswerable items (default 0.5, 0.3, 0.2).
	Size int
	Mix  [3]float64
	// Budget stops generation when it is spent; nil: no budget.
	Budget Budget
	// Redact cleans what is written (documents, questions, answers); nil writes as is.
	Redact func(string) string
}

// Report is what Generate did.
type Report struct {
	Written    map[string]int // by kind
	Duplicates int            // questions dropped as duplicates of earlier ones
	Failed     int            // calls that failed or gave no usable item
	CostUSD    float64
	Stopped    string // "budget" when the budget ran out before Size items
}

type reply struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

var schema = llm.Schema{"type": "object", "additionalProperties": false, "required": []any{"question", "answer"},
	"properties": map[string]any{"question": map[string]any{"type": "string"}, "answer": map[string]any{"type": "string"}}}

const system = "You write evaluation data for a retrieval-augmented question answering system. Reply with one JSON object {\"question\": ..., \"answer\": ...} and nothing else."

// Generate writes up to o.Size items to out, one record per line: query = the question,
// reference = the answer, documents = the source documents (relevance 1 for those that answer
// it), attributes synthetic.kind and synthetic.sources. Documents are visited in an order fixed
// by a hash of their ids, so the same traffic gives the same set.
func Generate(ctx context.Context, docs []Doc, out io.Writer, o Options) (Report, error) {
	rep := Report{Written: map[string]int{}}
	if len(docs) == 0 {
		return rep, errors.New("no documents with content in the input")
	}
	if o.Mix == ([3]float64{}) {
		o.Mix = [3]float64{0.5, 0.3, 0.2}
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	want := quotas(o.Size, o.Mix)
	byID := make(map[string]Doc, len(docs))
	order := make([]Doc, len(docs))
	copy(order, docs)
	for _, d := range docs {
		byID[d.ID] = d
	}
	sort.Slice(order, func(i, j int) bool { return hash(order[i].ID) < hash(order[j].ID) })
	seen := map[string]bool{}
	enc := json.NewEncoder(out)
	kinds := []string{KindSingle, KindMulti, KindUnanswerable}
	for k, kind := range kinds {
		for i := 0; rep.Written[kind] < want[k] && i < len(order); i++ {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			if o.Budget != nil && !o.Budget.Allow(false) {
				rep.Stopped = "budget"
				return rep, nil
			}
			src := []Doc{order[i]}
			if kind == KindMulti {
				partner, ok := pick(order[i], byID)
				if !ok {
					continue
				}
				src = append(src, partner)
			}
			var r reply
			u, err := o.Judge.Ask(ctx, llm.Question{Metric: "generate", System: system, User: prompt(kind, src), Schema: schema}, &r)
			usd := u.CostUSD
			if o.Budget != nil {
				usd = o.Budget.Charge(o.Judge.Backend().Model(), u.InputTokens, u.OutputTokens, u.CostUSD)
			}
			rep.CostUSD += usd
			q, a := strings.TrimSpace(o.Redact(r.Question)), strings.TrimSpace(o.Redact(r.Answer))
			if kind == KindUnanswerable {
				a = Refusal
			}
			if err != nil || q == "" || a == "" {
				rep.Failed++
				continue
			}
			if seen[fold(q)] {
				rep.Duplicates++
				continue
			}
			seen[fold(q)] = true
			if err := enc.Encode(item(kind, q, a, src, o.Redact)); err != nil {
				return rep, fmt.Errorf("write output: %w", err)
			}
			rep.Written[kind]++
		}
	}
	return rep, nil
}

// quotas splits size by the mix, largest remainders first.
func quotas(size int, mix [3]float64) [3]int {
	total := mix[0] + mix[1] + mix[2]
	var q [3]int
	rem := make([]struct {
		i int
		r float64
	}, 3)
	sum := 0
	for i, m := range mix {
		x := float64(size) * m / total
		q[i] = int(x)
		sum += q[i]
		rem[i].i, rem[i].r = i, x-float64(q[i])
	}
	sort.SliceStable(rem, func(a, b int) bool { return rem[a].r > rem[b].r })
	for j := 0; sum < size; j++ {
		q[rem[j%3].i]++
		sum++
	}
	return q
}

// pick is the first document retrieved with d (a question over two documents that traffic
// retrieved together), else none.
func pick(d Doc, byID map[string]Doc) (Doc, bool) {
	for _, id := range d.With {
		if p, ok := byID[id]; ok {
			return p, true
		}
	}
	return Doc{}, false
}

func prompt(kind string, src []Doc) string {
	var b strings.Builder
	switch kind {
	case KindSingle:
		b.WriteString("Write one question a user could ask that this document answers, and its answer taken only from the document.\n")
	case KindMulti:
		b.WriteString("Write one question that needs BOTH documents to answer (neither alone is enough), and its answer taken only from them.\n")
	case KindUnanswerable:
		b.WriteString("Write one question on the same topic as this document that the document does NOT answer, so that a correct system declines to answer. Set \"answer\" to an empty string.\n")
	}
	for i, d := range src {
		fmt.Fprintf(&b, "\nDOCUMENT %d:\n%s\n", i+1, d.Content)
	}
	return b.String()
}

func item(kind, q, a string, src []Doc, redact func(string) string) record.Record {
	ids := make([]string, len(src))
	for i, d := range src {
		ids[i] = d.ID
	}
	r := record.Record{TraceID: "synth-" + hash(kind + "\x00" + fold(q))[:16], Query: q, Reference: a,
		Attributes: map[string]string{"synthetic.kind": kind, "synthetic.sources": strings.Join(ids, ",")}}
	rel := map[string]int{}
	for _, d := range src {
		r.Documents = append(r.Documents, record.Document{ID: d.ID, Content: redact(d.Content)})
		if kind != KindUnanswerable {
			rel[d.ID] = 1
		} else {
			rel[d.ID] = 0
		}
	}
	r.Relevance = rel
	return r
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
