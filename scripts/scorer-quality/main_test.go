package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/sampler/scorers/builtin/quality"
)

// A tiny data directory with the shared layout: the command reads it, scores both scorers and
// prints the answer-level and claim-level tables.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	header := "model_name\tdata_source\tknowledge\tmessage\tresponse\tbegin_label\n"
	write("begin/begin_dev_wow.tsv", header+
		"m\twow\tThe bridge opened in 1937.\tq\tThe bridge opened in 1937.\tFully attributable\n"+
		"m\twow\tThe bridge opened in 1937.\tq\tWhales sing loudly at night.\tNot fully attributable\n")
	write("begin/begin_dev_cmu.tsv", header+
		"m\tcmu\tThe film stars Tom Hanks.\tq\tThe film stars Tom Hanks.\tFully attributable\n"+
		"m\tcmu\tThe film stars Tom Hanks.\tq\tyes\tGeneric\n")
	// Second response: "It cost 9 dollars." is a labelled span (bytes 26..44).
	write("ragtruth/ragtruth_summary.jsonl",
		`{"source":"The bridge opened in 1937. It carries six lanes.","responses":[`+
			`{"response":"The bridge opened in 1937.","labels":[]},`+
			`{"response":"The bridge opened in 1937. It cost 9 dollars.","labels":[{"start":27,"end":45,"implicit_true":false}]}]}`+"\n")
	var out, errOut bytes.Buffer
	if code := run([]string{"-data", dir, "-resamples", "50"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	got := out.String()
	for _, want := range []string{
		"begin-wow                        builtin faithfulness       2     1   1.000  [",
		"begin-wow                        word overlap               2     1   1.000  [",
		"begin-cmu                        builtin faithfulness       2     1   0.500  [",
		`begin-cmu                        (1 answers hold no verifiable claim, e.g. "yes": builtin omits faithfulness, scored 1 here)`,
		"ragtruth-summary                 builtin faithfulness       2     1   1.000  [",
		"ragtruth-summary/claims          builtin claim support      3     1   1.000  [",
		// The one source passage hashes even: both answers are in the dev half.
		"ragtruth-summary/dev             builtin faithfulness       2     1   1.000  [",
		"ragtruth-summary/held-out        builtin faithfulness       0     0   0.500  [",
		"ragtruth-summary/dev/claims      builtin claim support      3     1   1.000  [",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if code := run([]string{"-data", filepath.Join(dir, "missing")}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "scorer-quality: open ") {
		t.Errorf("missing data: exit %d, stderr %q", code, errOut.String())
	}
}

// The calibration is fitted on the development half only: held-out answers whose labels
// contradict the development half do not move the map, and the held-out half is reported as
// unseen, with the ceiling of any threshold chosen on it.
func TestCalibrateFitsOnTheDevelopmentHalf(t *testing.T) {
	var dev, held []quality.Example
	for n := 2; len(dev) < 8 || len(held) < 8; n++ {
		ctx := fmt.Sprintf("The bridge opened in 1937. It carries %d lanes of traffic over the river.", n)
		faithful := quality.Example{Context: ctx, Answer: "The bridge opened in 1937."}
		invented := quality.Example{Context: ctx, Answer: "The bridge was painted purple by volunteers.", Hallucinated: true}
		if quality.IsDev(faithful) {
			dev = append(dev, faithful, invented)
		} else {
			// Labels swapped: fitted on these too, the map would move.
			faithful.Hallucinated, invented.Hallucinated = true, false
			held = append(held, faithful, invented)
		}
	}
	all := append(append([]quality.Example{}, dev...), held...)
	want := fitCalibration(dev, rawFaithfulness(dev))
	if both := fitCalibration(all, rawFaithfulness(all)); both == want {
		t.Fatalf("test data does not tell the halves apart: both fits give %+v", want)
	}
	var out bytes.Buffer
	if err := calibrate(&out, []quality.Split{{Name: "ragtruth-summary", Examples: all}}, ""); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, s := range []string{
		fmt.Sprintf("fitted on all of ragtruth-summary/dev: center %.4f, slope %.4f\n", want.Center, want.Slope),
		fmt.Sprintf("ragtruth-summary/held-out  (not used for fitting) n %d ", len(held)),
		// The held-out labels are reversed: no threshold flags the (well supported) hallucinated
		// answers without the others.
		"ragtruth-summary/held-out  ceiling: the best F1 of any raw threshold, chosen on this half itself: 0.000 at raw ",
	} {
		if !strings.Contains(got, s) {
			t.Errorf("output lacks %q:\n%s", s, got)
		}
	}
}
