package agentmcp

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type docsArgs struct {
	Page    string `json:"page,omitempty" jsonschema:"one page to read in full: a slug from the index (e.g. agents, cli, interop); spec and mcp-tools name the wire contract and the tools page. Leave page and query empty for the index"`
	Query   string `json:"query,omitempty" jsonschema:"keywords to search every page for, e.g. a subject, a cotal_* tool or a field name; ignored when page is set"`
	Refresh bool   `json:"refresh,omitempty" jsonschema:"with page: also ask for a newer copy of this version's page; this build has none to fetch, so the built-in page is served and the reply says so"`
}

type docsOut struct {
	Page     string      `json:"page,omitempty"`
	Source   string      `json:"source"`
	Pages    []docsPage  `json:"pages,omitempty"`
	Sections []docsMatch `json:"sections,omitempty"`
}

type docsPage struct {
	Slug  string `json:"slug"`
	Title string `json:"title"`
}

type docsMatch struct {
	Page    string `json:"page"`
	Heading string `json:"heading"`
	Excerpt string `json:"excerpt"`
}

// docsAliases are the reference's page names that this project's pages answer.
var docsAliases = map[string]string{"spec": "interop", "mcp-tools": "agents"}

// Search bounds: sections returned, characters of each excerpt, query length.
const (
	docsHits    = 5
	docsExcerpt = 700
	maxDocsArg  = 200
)

func docsSchema() *jsonschema.Schema {
	return toolSchema[docsArgs](func(p map[string]*jsonschema.Schema) {
		p["page"].MaxLength = maxLen(maxDocsArg)
		p["query"].MaxLength = maxLen(maxDocsArg)
	})
}

// docPages lists the slugs and titles (first heading) of s.Docs, sorted by slug.
func (s *Server) docPages() ([]docsPage, error) {
	names, err := fs.Glob(s.Docs, "*.md")
	if err != nil {
		return nil, fmt.Errorf("docs: %w", err)
	}
	var out []docsPage
	for _, n := range names {
		b, err := fs.ReadFile(s.Docs, n)
		if err != nil {
			return nil, fmt.Errorf("docs page %s: %w", n, err)
		}
		title := strings.TrimSuffix(n, ".md")
		for _, l := range strings.Split(string(b), "\n") {
			if h, ok := strings.CutPrefix(l, "# "); ok {
				title = strings.TrimSpace(h)
				break
			}
		}
		out = append(out, docsPage{Slug: strings.TrimSuffix(n, ".md"), Title: title})
	}
	return out, nil
}

func (s *Server) docsTool(_ context.Context, _ *mcp.CallToolRequest, a docsArgs) (*mcp.CallToolResult, docsOut, error) {
	pages, err := s.docPages()
	if err != nil {
		return nil, docsOut{}, err
	}
	out := docsOut{Source: "built-in, version " + s.Version}
	switch {
	case a.Page != "":
		slug := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(a.Page), ".md"))
		if alias, ok := docsAliases[slug]; ok {
			slug = alias
		}
		if !slices.ContainsFunc(pages, func(p docsPage) bool { return p.Slug == slug }) || path.Base(slug) != slug {
			return nil, docsOut{}, fmt.Errorf("no docs page %q: call cotal_docs with no arguments for the index (pages: %s)", a.Page, slugs(pages))
		}
		b, err := fs.ReadFile(s.Docs, slug+".md")
		if err != nil {
			return nil, docsOut{}, fmt.Errorf("docs page %s: %w", slug, err)
		}
		out.Page = slug
		note := ""
		if a.Refresh {
			note = "(refresh: this build fetches no newer copy; this is the page built into version " + s.Version + ")\n\n"
		}
		return text("%s%s", note, b), out, nil
	case strings.TrimSpace(a.Query) != "":
		out.Sections = s.searchDocs(pages, a.Query)
		if len(out.Sections) == 0 {
			return text("Nothing in the docs matches %q. Call cotal_docs with no arguments for the index.", a.Query), out, nil
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Sections matching %q (read the full page with cotal_docs page=...):", a.Query)
		for _, m := range out.Sections {
			fmt.Fprintf(&b, "\n\n[page %s] %s\n%s", m.Page, m.Heading, m.Excerpt)
		}
		return text("%s", b.String()), out, nil
	}
	out.Pages = pages
	var b strings.Builder
	fmt.Fprintf(&b, "Cotal docs (version %s), %d pages. Read one with cotal_docs page=SLUG, or search with query=...:", s.Version, len(pages))
	for _, p := range pages {
		fmt.Fprintf(&b, "\n  %s: %s", p.Slug, p.Title)
	}
	return text("%s", b.String()), out, nil
}

func slugs(pages []docsPage) string {
	var l []string
	for _, p := range pages {
		l = append(l, p.Slug)
	}
	return strings.Join(l, ", ")
}

// searchDocs scores every section (a heading and the text up to the next) by how often
// the query's words occur in it, a word in the heading counting thrice, and returns the
// best docsHits sections.
func (s *Server) searchDocs(pages []docsPage, query string) []docsMatch {
	words := strings.Fields(strings.ToLower(query))
	type scored struct {
		m     docsMatch
		score int
	}
	var all []scored
	for _, p := range pages {
		b, err := fs.ReadFile(s.Docs, p.Slug+".md")
		if err != nil {
			continue
		}
		for _, sec := range sections(string(b)) {
			lh, lb := strings.ToLower(sec[0]), strings.ToLower(sec[1])
			score := 0
			for _, w := range words {
				score += 3*strings.Count(lh, w) + strings.Count(lb, w)
			}
			if score == 0 {
				continue
			}
			ex := strings.TrimSpace(sec[1])
			if r := []rune(ex); len(r) > docsExcerpt {
				ex = string(r[:docsExcerpt]) + " …"
			}
			all = append(all, scored{m: docsMatch{Page: p.Slug, Heading: sec[0], Excerpt: ex}, score: score})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].score > all[j].score })
	var out []docsMatch
	for i := 0; i < len(all) && i < docsHits; i++ {
		out = append(out, all[i].m)
	}
	return out
}

// sections splits a Markdown page at its headings into (heading, body) pairs; text
// before the first heading has the heading "".
func sections(page string) [][2]string {
	var out [][2]string
	cur := [2]string{}
	var body strings.Builder
	fence := false
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		if !fence && strings.HasPrefix(l, "#") {
			cur[1] = body.String()
			if cur[0] != "" || strings.TrimSpace(cur[1]) != "" {
				out = append(out, cur)
			}
			cur, body = [2]string{strings.TrimSpace(strings.TrimLeft(l, "#")), ""}, strings.Builder{}
			continue
		}
		body.WriteString(l)
		body.WriteString("\n")
	}
	cur[1] = body.String()
	return append(out, cur)
}
