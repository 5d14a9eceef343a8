package version

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestBuildString(t *testing.T) {
	for b, want := range map[Build]string{
		{}:                                       "commit unknown",
		{Commit: "0123456789abcdef0123"}:         "commit 0123456789ab",
		{Commit: "0123456789ab", Modified: true}: "commit 0123456789ab, modified",
	} {
		if got := b.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", b, got, want)
		}
	}
}

func TestFromSettings(t *testing.T) {
	b := fromSettings([]debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"}})
	if b != (Build{Commit: "abc", Modified: true}) {
		t.Errorf("got %#v", b)
	}
}

func TestOfRefusesNonGoFile(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("not an executable")
	f.Close()
	if _, err := Of(f.Name()); err == nil {
		t.Error("Of(text file) succeeded")
	}
}

func TestOfReadsGoBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	if _, err := Of(exe); err != nil {
		t.Errorf("Of(this test binary): %v", err)
	}
}
