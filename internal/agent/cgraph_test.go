package agent

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCFilesFormATree holds the agent's C files to a tree: no file uses a
// global that a file using it (directly or not) defines. scripts/agent-graph
// lists who uses whom from the objects' symbols; process.c and thread.c are
// the leaves everyone reads, start.c the root.
func TestCFilesFormATree(t *testing.T) {
	for _, tool := range []string{"gcc", "nm", "join"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: the graph is read from compiled objects", tool)
		}
	}
	touchSources(t, ".")
	out, err := exec.Command("bash", filepath.Join("..", "..", "scripts", "agent-graph"), ".").CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/agent-graph: %v\n%s", err, out)
	}
	uses := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		edge, _, _ := strings.Cut(line, ":")
		from, to, ok := strings.Cut(edge, " -> ")
		if !ok {
			t.Fatalf("scripts/agent-graph: unexpected line %q", line)
		}
		uses[from] = append(uses[from], to)
	}
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(f string)
	visit = func(f string) {
		switch state[f] {
		case open:
			t.Errorf("a circle: %s -> %s", strings.Join(path, " -> "), f)
			return
		case done:
			return
		}
		state[f] = open
		path = append(path, f)
		for _, g := range uses[f] {
			visit(g)
		}
		path = path[:len(path)-1]
		state[f] = done
	}
	for f := range uses {
		visit(f)
	}
}
