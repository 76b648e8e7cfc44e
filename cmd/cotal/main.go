// Command cotal is the Cotal command line: one binary with an embedded broker.
package main

import (
	"os"

	"github.com/cotal-ai/cotal/internal/cli"
)

func main() { os.Exit(cli.Main()) }
