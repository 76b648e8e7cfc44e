package lang

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

type corpusCase struct {
	Index   int             `json:"index"`
	Heading string          `json:"heading"`
	Source  string          `json:"source"`
	Verdict json.RawMessage `json:"verdict"`
}

// TestConformanceCorpus measures the validator against the reference corpus's
// case list (every js block of the language document, with its verdict) under
// the corpus's own adjudication rule, and reports the figure.
func TestConformanceCorpus(t *testing.T) {
	raw, err := os.ReadFile("testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []corpusCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) == 0 {
		t.Fatal("the corpus holds no cases")
	}
	passed := 0
	for _, c := range doc.Cases {
		got := Validate(c.Source)
		var accepted string
		var refused struct {
			Refused string `json:"refused"`
		}
		ok := false
		switch {
		case json.Unmarshal(c.Verdict, &accepted) == nil && accepted == "accepted":
			ok = got.OK()
		case json.Unmarshal(c.Verdict, &refused) == nil && refused.Refused != "":
			ok = slices.Contains(got.Codes(), refused.Refused)
		default:
			t.Fatalf("case %d: unreadable verdict %s", c.Index, c.Verdict)
		}
		if ok {
			passed++
		} else {
			t.Errorf("case %d (%s): verdict %s, validator answered %v", c.Index, c.Heading, c.Verdict, got.Problems)
		}
	}
	t.Logf("conformance: %d/%d corpus cases pass", passed, len(doc.Cases))
}
