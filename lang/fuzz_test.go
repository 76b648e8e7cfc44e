package lang

import (
	"context"
	"regexp"
	"testing"
)

var codeRE = regexp.MustCompile(`^L[1-6][0-9]{3}$`)

func seedCorpus(f *testing.F) {
	for _, c := range refusalCases {
		f.Add(c.src)
	}
	for _, src := range acceptedCases {
		f.Add(src)
	}
	for _, c := range runtimeFaults {
		f.Add(c.src)
	}
	f.Add("")
	f.Add("})")
	f.Add("/*")
	f.Add("`${")
}

// FuzzValidate: the validator never panics, and every refusal carries a
// catalog code, a title and a position inside the program.
func FuzzValidate(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, src string) {
		v := Validate(src)
		for _, p := range append(v.Problems, v.Warnings...) {
			if !codeRE.MatchString(p.Code) || p.Title == "" || p.Message == "" {
				t.Fatalf("refusal without a code, title or message: %+v", p)
			}
			if p.Line < 1 || p.Column < 1 {
				t.Fatalf("refusal without a position: %+v", p)
			}
		}
	})
}

// FuzzRun: a program the validator accepts runs to an end (a value, a
// refusal or a budget) without panicking, against the fake effects.
func FuzzRun(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, src string) {
		prog, err := Compile(src)
		if err != nil {
			return
		}
		_ = prog.Run(context.Background(), Options{RunID: "run-fuzz", StepBudget: 20_000, EffectCeiling: 50, Effects: newFake()})
	})
}
