// Package docs carries cotal's own documentation, the Markdown pages of this folder,
// inside the binary, so an agent reads the pages of the version it runs (cotal_docs)
// without a network.
package docs

import (
	"embed"
	"io/fs"
)

//go:embed *.md
var pages embed.FS

// Pages is the documentation as a file system of NAME.md pages at its root.
func Pages() fs.FS { return pages }
