package cli_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdRefSession asks the reference IdP at URL whether the session kept for it in FILE (a
// copy of idp-sessions.json) is still live: GET <URL>/token with it, printing the status
// code, so a script can tell a session ended at the IdP from one only forgotten here:
//
//	refsession URL FILE
func cmdRefSession(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: refsession URL FILE")
	}
	var f struct {
		Sessions map[string]struct {
			Token string `json:"token"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(args[1])), &f); err != nil {
		ts.Fatalf("refsession: %s: %v", args[1], err)
	}
	s, ok := f.Sessions[strings.TrimSuffix(args[0], "/")]
	if !ok || s.Token == "" {
		ts.Fatalf("refsession: no session of %s in %s", args[0], args[1])
	}
	req, err := http.NewRequest(http.MethodGet, args[0]+"/token", nil)
	if err != nil {
		ts.Fatalf("refsession: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		ts.Fatalf("refsession: %v", err)
	}
	_ = resp.Body.Close()
	fmt.Fprintln(ts.Stdout(), resp.StatusCode)
}
