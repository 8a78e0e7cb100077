// Command mtrag converts MTRAG benchmark turns (IBM/mt-rag-benchmark's generation tasks, one
// JSON object a line: `input` conversation, `contexts`, `targets`, `predictions`) into ragwatch
// records (docs/record.md) for `ragwatch eval`: the last input message is the query, the
// earlier ones the history, the first prediction the answer, the first target the reference.
//
//	go run ./scripts/mtrag < ../shared/data/mtrag/responses-10.jsonl > /tmp/mtrag.jsonl
//	go run ./cmd/ragwatch eval --input /tmp/mtrag.jsonl [--no-history]
//
// With -resolution it prints instead, per turn, MTRAG's Multi-Turn label (Follow-up,
// Clarification) and whether the built-in scorer resolves the question against its history
// (builtin.ResolveQuestion), then the counts (docs/conversations.md, "Measured on MTRAG").
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
)

type turn struct {
	TaskID string `json:"task_id"`
	Turn   int    `json:"turn"`
	Input  []struct {
		Speaker string `json:"speaker"`
		Text    string `json:"text"`
	} `json:"input"`
	Contexts []struct {
		DocumentID string `json:"document_id"`
		Text       string `json:"text"`
	} `json:"contexts"`
	Targets     []struct{ Text string } `json:"targets"`
	Predictions []struct{ Text string } `json:"predictions"`
	Answerable  []string                `json:"answerability"`
	MultiTurn   []string                `json:"Multi-Turn"`
}

func main() {
	resolution := flag.Bool("resolution", false, "print which questions the built-in scorer resolves against their history")
	flag.Parse()
	run := convert
	if *resolution {
		run = resolutions
	}
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mtrag:", err)
		os.Exit(1)
	}
}

func convert(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	enc := json.NewEncoder(out)
	for n := 1; sc.Scan(); n++ {
		var t turn
		// MTRAG writes NaN for empty fields, which is not JSON: those fields are not read.
		line := sc.Bytes()
		if err := json.Unmarshal(nanToNull(line), &t); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if len(t.Input) == 0 || len(t.Predictions) == 0 {
			return fmt.Errorf("line %d: no input or no prediction", n)
		}
		r := record.Record{TraceID: t.TaskID, Turn: t.Turn, Query: t.Input[len(t.Input)-1].Text, Answer: t.Predictions[0].Text}
		for _, m := range t.Input[:len(t.Input)-1] {
			role := record.RoleUser
			if m.Speaker != "user" {
				role = record.RoleAssistant
			}
			r.History = append(r.History, record.Message{Role: role, Content: m.Text})
		}
		for _, c := range t.Contexts {
			r.Documents = append(r.Documents, record.Document{ID: c.DocumentID, Content: c.Text})
		}
		if len(t.Targets) > 0 {
			r.Reference = t.Targets[0].Text
		}
		if len(t.Answerable) > 0 || len(t.MultiTurn) > 0 {
			r.Attributes = map[string]string{}
		}
		if len(t.Answerable) > 0 {
			r.Attributes["answerability"] = t.Answerable[0]
		}
		if len(t.MultiTurn) > 0 {
			r.Attributes["multi_turn"] = strings.Join(t.MultiTurn, ",")
		}
		if err := enc.Encode(&r); err != nil {
			return err
		}
	}
	return sc.Err()
}

// nanToNull replaces the bare NaN values MTRAG's pandas export writes with null.
func nanToNull(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr:
			if esc {
				esc = false
			} else if c == '\\' {
				esc = true
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == 'N' && i+2 < len(b) && b[i+1] == 'a' && b[i+2] == 'N':
			out = append(out, "null"...)
			i += 2
			continue
		}
		out = append(out, c)
	}
	return out
}

// resolutions prints, per turn, its Multi-Turn label and whether builtin.ResolveQuestion
// resolves it, then how many labelled and unlabelled turns were resolved.
func resolutions(in io.Reader, out io.Writer) error {
	var recs bytes.Buffer
	if err := convert(in, &recs); err != nil {
		return err
	}
	type count struct{ n, resolved int }
	byLabel := map[bool]*count{true: {}, false: {}}
	fmt.Fprintf(out, "%-5s %-15s %-9s %s\n", "turn", "multi-turn", "resolved", "question")
	dec := json.NewDecoder(&recs)
	for {
		var r record.Record
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		_, resolved := builtin.ResolveQuestion(r.Query, r.History)
		label := r.Attributes["multi_turn"]
		c := byLabel[label != ""]
		c.n++
		if resolved {
			c.resolved++
		}
		if label == "" {
			label = "-"
		}
		fmt.Fprintf(out, "%-5d %-15s %-9v %s\n", r.Turn, label, resolved, r.Query)
	}
	fmt.Fprintf(out, "resolved: %d of %d labelled Follow-up/Clarification, %d of %d others\n",
		byLabel[true].resolved, byLabel[true].n, byLabel[false].resolved, byLabel[false].n)
	return nil
}
