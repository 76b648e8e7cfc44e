package cli_test

import (
	"archive/tar"
	"bytes"
	"io"
	"os"

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
