package cli

import (
	"errors"
	"os/exec"
	"strings"
)

// Command lines: those a report suggests, quoted for a shell, and the programs a verb runs.

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./+:=@%,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// unwrapExecError is why a program cannot be run without exec's wrapping (exec: "NAME": ...):
// the message names the program itself.
func unwrapExecError(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}
