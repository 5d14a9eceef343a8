// Package version is gpurr's version, in one place: the CLI prints it, the agent stores it in
// every recording, and the wheel build reads it.
package version

import (
	"debug/buildinfo"
	"fmt"
	"runtime/debug"
)

// Version is gpurr's release version.
const Version = "0.1.0"

// Build describes a Go binary's origin: the commit it was built from ("" when unknown, e.g.
// built outside a git checkout) and whether the tree had uncommitted changes.
type Build struct {
	Commit   string
	Modified bool
}

func (b Build) String() string {
	switch {
	case b.Commit == "":
		return "commit unknown"
	case b.Modified:
		return fmt.Sprintf("commit %.12s, modified", b.Commit)
	}
	return fmt.Sprintf("commit %.12s", b.Commit)
}

// This returns the running binary's build.
func This() Build {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Build{}
	}
	return fromSettings(info.Settings)
}

// Of reads the build of the Go binary or shared library at path (the agent, for one), without
// loading it.
func Of(path string) (Build, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return Build{}, err
	}
	return fromSettings(info.Settings), nil
}

func fromSettings(settings []debug.BuildSetting) Build {
	var b Build
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}
