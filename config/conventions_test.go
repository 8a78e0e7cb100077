package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestConventions(t *testing.T) {
	c, err := Parse([]byte("conventions:\n  retrieval_tools: [getInformation, searchDocs]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"getInformation", "searchDocs"}; !reflect.DeepEqual(c.Conventions.RetrievalTools, want) {
		t.Fatalf("retrieval_tools = %q, want %q", c.Conventions.RetrievalTools, want)
	}
	if d := Default(); d.Conventions.RetrievalTools != nil {
		t.Fatalf("default retrieval_tools = %q, want none", d.Conventions.RetrievalTools)
	}

	long := strings.Repeat("x", 257)
	_, err = Parse([]byte("conventions:\n  retrieval_tools: [a, \"\", a, " + long + "]\n"))
	if err == nil {
		t.Fatal("bad conventions loaded")
	}
	for _, want := range []string{
		"line 2: `conventions.retrieval_tools` entry 1 is empty",
		"line 2: `conventions.retrieval_tools` entry 2 repeats \"a\"",
		"line 2: `conventions.retrieval_tools` entry 3 is longer than 256 bytes",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	_, err = Parse([]byte("conventions:\n  retrieval_tools: [" + strings.Repeat("t,", 65) + "]\n"))
	if err == nil || !strings.Contains(err.Error(), "`conventions.retrieval_tools` at most 64 tools, got 65") {
		t.Errorf("65 tools: %v", err)
	}
	_, err = Parse([]byte("conventions:\n  retrieval_tool: [a]\n"))
	if err == nil || !strings.Contains(err.Error(), "retrieval_tool") {
		t.Errorf("unknown key: %v", err)
	}
}
