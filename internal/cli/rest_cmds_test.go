package cli_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdTarAdd writes a copy of a tar archive with one more plain file in it (an archive a
// user was handed, with something slipped in):
//
//	taradd IN.tar OUT.tar NAME FILE
func cmdTarAdd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: taradd IN.tar OUT.tar NAME FILE")
	}
	in, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	body, err := os.ReadFile(ts.MkAbs(args[3]))
	ts.Check(err)
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	tr := tar.NewReader(bytes.NewReader(in))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		ts.Check(err)
		b, err := io.ReadAll(tr)
		ts.Check(err)
		ts.Check(tw.WriteHeader(h))
		_, err = tw.Write(b)
		ts.Check(err)
	}
	ts.Check(tw.WriteHeader(&tar.Header{Name: args[2], Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(body))}))
	_, err = tw.Write(body)
	ts.Check(err)
	ts.Check(tw.Close())
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), out.Bytes(), 0o600))
}

// cmdJSONDoc checks that a file (e.g. a copied stdout) is exactly one JSON object, and
// that each named field, printed with %v, matches its regular expression:
//
//	jsondoc FILE [KEY=REGEXP]...
func cmdJSONDoc(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: jsondoc FILE [KEY=REGEXP]...")
	}
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	dec := json.NewDecoder(bytes.NewReader(b))
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		ts.Fatalf("jsondoc %s: not a JSON object: %v", args[0], err)
	}
	if _, err := dec.Token(); err != io.EOF {
		ts.Fatalf("jsondoc %s: more than one JSON document", args[0])
	}
	for _, kv := range args[1:] {
		key, re, ok := strings.Cut(kv, "=")
		if !ok {
			ts.Fatalf("jsondoc: %q: want KEY=REGEXP", kv)
		}
		v, has := doc[key]
		if !has {
			ts.Fatalf("jsondoc %s: no field %q", args[0], key)
		}
		if got := fmt.Sprint(v); !regexp.MustCompile(re).MatchString(got) {
			ts.Fatalf("jsondoc %s: %s is %q, want %s", args[0], key, got, re)
		}
	}
}
