// Command gpurr records, replays and inspects the GPU work of CUDA programs.
// See README.md; all behaviour lives in internal/cli.
package main

import (
	"os"

	"github.com/gpurr/gpurr/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
