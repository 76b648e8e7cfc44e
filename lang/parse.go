package lang

import (
	"errors"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

// A program is parsed as the body of an async function so that top-level
// await reads as it does in a module; the wrapper's own line is subtracted from
// every position reported.
const (
	wrapPrefix = "(async function(){\n"
	wrapSuffix = "\n})"
)

// parsed is a program's syntax tree with the means to turn node offsets back
// into the author's coordinates.
type parsed struct {
	src  string
	fn   *ast.FunctionLiteral // the wrapper; fn.Body.List is the program
	body []ast.Statement
}

// offset converts a goja index into a byte offset in the author's source.
func (p *parsed) offset(idx int) int {
	o := idx - 1 - len(wrapPrefix)
	if o < 0 {
		return 0
	}
	if o > len(p.src) {
		return len(p.src)
	}
	return o
}

// pos converts a goja index into a 1-based line and column (in characters).
func (p *parsed) pos(idx int) (line, col int) {
	return lineCol(p.src, p.offset(idx))
}

func lineCol(src string, off int) (line, col int) {
	if off > len(src) {
		off = len(src)
	}
	before := src[:off]
	line = strings.Count(before, "\n") + 1
	start := strings.LastIndexByte(before, '\n') + 1
	col = utf8.RuneCountInString(before[start:]) + 1
	return line, col
}

// offsetAt converts a 1-based line and column back into a byte offset.
func offsetAt(src string, line, col int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := strings.IndexByte(src[off:], '\n')
		if i < 0 {
			return len(src)
		}
		off += i + 1
	}
	for c := 1; c < col && off < len(src); c++ {
		_, w := utf8.DecodeRuneInString(src[off:])
		off += w
	}
	return off
}

var (
	moduleWord = regexp.MustCompile(`^(import|export)\b`)
	awaitWord  = regexp.MustCompile(`\bawait\s*$`)
)

// parse reads a program or answers the one problem that stops it being read.
func parse(src string) (*parsed, *Problem) {
	if !utf8.ValidString(src) {
		return nil, newProblem("L1029", 1, 1, "the program is not valid UTF-8", "save the file as UTF-8")
	}
	if strings.ContainsRune(src, 0) {
		return nil, newProblem("L1029", 1, 1, "the program contains a NUL character", "remove it")
	}
	wrapped := wrapPrefix + src + wrapSuffix
	prog, err := parser.ParseFile(nil, "", wrapped, 0)
	if err != nil {
		return nil, parseProblem(src, err)
	}
	p := &parsed{src: src}
	if len(prog.Body) == 1 {
		if es, ok := prog.Body[0].(*ast.ExpressionStatement); ok {
			if fl, ok := es.Expression.(*ast.FunctionLiteral); ok && int(fl.Body.RightBrace) == len(wrapped)-1 {
				p.fn, p.body = fl, fl.Body.List
				return p, nil
			}
		}
	}
	// The source closed the wrapper early: it is not one program.
	return nil, newProblem("L1029", 1, 1, "the program has an unbalanced closing brace or parenthesis", "balance every brace and parenthesis")
}

func parseProblem(src string, err error) *Problem {
	var list parser.ErrorList
	line, col, msg := 0, 0, err.Error()
	if errors.As(err, &list) && len(list) > 0 {
		line, col, msg = list[0].Position.Line-1, list[0].Position.Column, list[0].Message
	}
	if line < 1 {
		line, col = 1, 1
	}
	off := offsetAt(src, line, col)
	if off > len(src) {
		off = len(src)
	}
	// The word the parser stopped at, and the text before it on its line.
	rest := src[off:]
	lineStart := strings.LastIndexByte(src[:off], '\n') + 1
	before := src[lineStart:off]
	tb := strings.TrimSpace(before)
	switch {
	case moduleWord.MatchString(rest) || strings.HasSuffix(tb, "import") || strings.HasSuffix(tb, "export"):
		return newProblem("L1020", line, col, "a program is one file: import and export are not part of the language", "one file; run() for run metadata")
	case strings.Contains(msg, "label"):
		return newProblem("L1017", line, col, "labels are not part of the language: "+msg, "a helper function or a flag")
	case awaitWord.MatchString(before):
		// Blame the await itself, not the token the parser stopped at.
		_, col = lineCol(src, lineStart+strings.LastIndex(before, "await"))
		return newProblem("L1023", line, col, "await is used in a function that is not async", "mark the function async")
	}
	if l2, c2, ok := bareModuleKeyword(src); ok {
		return newProblem("L1020", l2, c2, "a program is one file: import and export are not part of the language", "one file; run() for run metadata")
	}
	if strings.Contains(msg, "Unexpected end of input") && off >= len(src) {
		return newProblem("L1029", line, col, "the program ends in the middle of a construct: "+msg, "close every brace, bracket and string")
	}
	return newProblem("L1029", line, col, "the parser stopped here: "+msg, "write only the syntax the language admits (LANG §2.2)")
}

var moduleLine = regexp.MustCompile(`(?m)^[ \t]*(import|export)\b`)

// bareModuleKeyword finds a line that opens with import or export, the most
// common module syntax, so a parse failure elsewhere in it still names L1020.
func bareModuleKeyword(src string) (line, col int, ok bool) {
	loc := moduleLine.FindStringSubmatchIndex(src)
	if loc == nil {
		return 0, 0, false
	}
	line, col = lineCol(src, loc[2])
	return line, col, true
}

func newProblem(code string, line, col int, msg, fix string) *Problem {
	return &Problem{Code: code, Title: Titles[code], Message: msg, Fix: fix, Line: line, Column: col}
}

func (p *parsed) problemAt(code string, idx int, msg, fix string) Problem {
	line, col := p.pos(idx)
	return *newProblem(code, line, col, msg, fix)
}
