package doctor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
)

// A broker whose open files run out fails the stream writes that need one more (the
// file store's "too many open files"): doctor warns from filesWarn of the limit in use,
// and fails from filesFail.
const (
	filesWarn = 0.80
	filesFail = 0.95
)

// checkOpenFiles reads how many files the mesh's broker process holds open against its
// limit, where the system shows it (/proc on Linux), and says how many spaces that limit
// holds written at once against how many the mesh serves.
func (d *doctor) checkOpenFiles() {
	if !d.up || d.mesh == nil || d.mesh.PID <= 0 || runtime.GOOS != "linux" {
		return
	}
	subject := "mesh pid " + strconv.Itoa(d.mesh.PID)
	inUse, soft, hard, err := processFiles("/proc", d.mesh.PID)
	if err != nil {
		d.add(Check{Check: "files", Subject: subject, Status: StatusWarn, Message: "cannot read the broker's open files: " + err.Error()})
		return
	}
	c := openFilesCheck(inUse, soft, hard, len(d.mesh.Spaces))
	c.Subject = subject
	d.add(c)
}

// openFilesCheck judges inUse open files under a soft (hard) limit for a broker serving
// spaces spaces.
func openFilesCheck(inUse, soft, hard uint64, spaces int) Check {
	c := broker.CapacityFor(soft, hard)
	used := fmt.Sprintf("%d of %d open files in use", inUse, soft)
	held := fmt.Sprintf("the limit holds %s written at once and this mesh serves %d",
		cmdutil.Count(c.Spaces, "space"), spaces)
	fix := fmt.Sprintf("raise the broker's open-file limit (ulimit -n or systemd LimitNOFILE before cotal up; the hard limit is %d) or serve some spaces from another broker", hard)
	switch {
	case soft == 0:
		return Check{Check: "files", Status: StatusWarn, Message: used + ": the broker may open no file"}
	case float64(inUse) >= filesFail*float64(soft):
		return Check{Check: "files", Status: StatusFail,
			Message: used + ": the broker fails stream writes once none are left (" + held + "); " + fix}
	case float64(inUse) >= filesWarn*float64(soft):
		return Check{Check: "files", Status: StatusWarn,
			Message: used + ", near the limit past which stream writes fail (" + held + "); " + fix}
	case spaces > c.Spaces:
		return Check{Check: "files", Status: StatusWarn,
			Message: used + ", but " + held + ": writing to all of them at once runs the broker out of files; " + fix}
	}
	return Check{Check: "files", Status: StatusOK, Message: used + "; " + held}
}

// processFiles counts the files process pid holds open and reads its open-file limit,
// soft and hard, from the proc file system mounted at proc.
func processFiles(proc string, pid int) (inUse, soft, hard uint64, err error) {
	dir := filepath.Join(proc, strconv.Itoa(pid))
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("list open files: %w", err)
	}
	limits, err := os.ReadFile(filepath.Join(dir, "limits"))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read limits: %w", err)
	}
	soft, hard, err = parseOpenFileLimit(limits)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%s: %w", filepath.Join(dir, "limits"), err)
	}
	return uint64(len(fds)), soft, hard, nil
}

// errNoOpenFileLimit reports a limits table without its "Max open files" row.
var errNoOpenFileLimit = errors.New(`no "Max open files" row`)

// parseOpenFileLimit reads the "Max open files" row of a /proc/<pid>/limits table:
// the row's name, the soft and the hard limit (a number or "unlimited"), and the unit.
// An unlimited limit is the largest uint64.
func parseOpenFileLimit(limits []byte) (soft, hard uint64, err error) {
	const row = "Max open files"
	s := bufio.NewScanner(bytes.NewReader(limits))
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), row)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return 0, 0, fmt.Errorf("%q row: want a soft and a hard limit, got %q", row, rest)
		}
		if soft, err = limitValue(f[0]); err != nil {
			return 0, 0, fmt.Errorf("%q row: soft limit: %w", row, err)
		}
		if hard, err = limitValue(f[1]); err != nil {
			return 0, 0, fmt.Errorf("%q row: hard limit: %w", row, err)
		}
		return soft, hard, nil
	}
	if err := s.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, errNoOpenFileLimit
}

// limitValue is one limit of a limits row: a count, or "unlimited".
func limitValue(s string) (uint64, error) {
	if s == "unlimited" {
		return ^uint64(0), nil
	}
	return strconv.ParseUint(s, 10, 64)
}
