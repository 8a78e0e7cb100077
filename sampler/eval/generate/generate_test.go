package generate

import (
	"strings"
	"testing"
)

func TestQuotas(t *testing.T) {
	for _, c := range []struct {
		size int
		mix  [3]float64
		want [3]int
	}{{10, [3]float64{0.5, 0.3, 0.2}, [3]int{5, 3, 2}}, {5, [3]float64{3, 1, 1}, [3]int{3, 1, 1}}, {4, [3]float64{1, 1, 1}, [3]int{2, 1, 1}}, {1, [3]float64{0, 0, 1}, [3]int{0, 0, 1}}} {
		if got := quotas(c.size, c.mix); got != c.want {
			t.Errorf("quotas(%d, %v) = %v, want %v", c.size, c.mix, got, c.want)
		}
	}
}

func TestDocuments(t *testing.T) {
	in := `{"trace_id":"a","query":"q","documents":[{"id":"d1","content":"Alpha beta."},{"id":"d2","content":"Gamma."},{"id":"e","content":""}]}
{"trace_id":"b","query":"q","documents":[{"id":"d9","content":"ALPHA,  beta"},{"id":"d3","content":"Delta delta delta delta."}]}
[1]
`
	docs, bad, err := Documents(strings.NewReader(in), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 1 || !strings.HasPrefix(bad[0], "line 3: invalid JSON") {
		t.Fatalf("bad %v", bad)
	}
	// d9 repeats d1's text: dropped, but its neighbour d3 is now retrieved with d1.
	var got []string
	for _, d := range docs {
		got = append(got, d.ID+"="+d.Content+"/"+strings.Join(d.With, "+"))
	}
	if want := "d1=Alpha beta/d2+d3 d2=Gamma./d1 d3=Delta delt/d1"; strings.Join(got, " ") != want {
		t.Fatalf("docs %q, want %q", strings.Join(got, " "), want)
	}
}

func FuzzDocuments(f *testing.F) {
	f.Add([]byte(`{"trace_id":"a","documents":[{"id":"d1","content":"x"},{"id":"d2","content":"X!"}]}` + "\n"))
	f.Add([]byte("{\n[1]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, _, err := Documents(strings.NewReader(string(data)), 64)
		if err != nil {
			t.Fatal(err) // a strings.Reader never fails
		}
		ids := map[string]bool{}
		for _, d := range docs {
			if ids[d.ID] || d.ID == "" {
				t.Fatalf("document %q twice or without an id", d.ID)
			}
			ids[d.ID] = true
			if len(d.Content) > 64 {
				t.Fatalf("content of %d bytes past the cut", len(d.Content))
			}
		}
	})
}
