package query

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
)

// A query reads the recording's tables and nothing else. Three guards: the statement is one
// statement; it does not begin with a keyword that writes (VACUUM INTO, for one, writes a file
// and has no authorizer action of its own); and SQLite's authorizer, installed on the
// connection once the tables are loaded, denies every action but reading: no ATTACH (which
// creates files), no writes or schema changes, no pragma but those that only list, no
// extension loading.

// ErrNotReading is wrapped by the error for a statement that does more than read.
var ErrNotReading = errors.New("gpurr query only reads the recording's tables")

// readingPragmas are the pragmas that only report.
var readingPragmas = map[string]bool{
	"table_info": true, "table_xinfo": true, "table_list": true, "index_list": true, "index_info": true,
	"index_xinfo": true, "foreign_key_list": true, "function_list": true, "pragma_list": true,
	"collation_list": true, "compile_options": true, "database_list": true,
}

func authorizeReading(action sqlite.AuthorizerActionCode, arg1, arg2, _, _ string) sqlite.AuthorizerReturnCode {
	switch action {
	case sqlite.AuthSelect, sqlite.AuthRead, sqlite.AuthRecursive:
		return sqlite.AuthorizerOK
	case sqlite.AuthFunction:
		if strings.EqualFold(arg2, "load_extension") {
			return sqlite.AuthorizerDeny
		}
		return sqlite.AuthorizerOK
	case sqlite.AuthPragma:
		if readingPragmas[strings.ToLower(arg1)] { // their argument names a table, never sets a value
			return sqlite.AuthorizerOK
		}
	}
	return sqlite.AuthorizerDeny
}

// readOnly installs the authorizer on the database's one connection.
func (db *DB) readOnly(ctx context.Context) error {
	conn, err := db.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		r, ok := dc.(sqlite.AuthorizerRegisterer)
		if !ok {
			return errors.New("the SQLite driver has no authorizer: queries cannot be kept read-only")
		}
		return r.RegisterAuthorizer(func(action sqlite.AuthorizerActionCode, arg1, arg2, database, trigger string) sqlite.AuthorizerReturnCode {
			if db.filling { // gpurr's own insert of memory_chunks (fillChunks), not the user's statement
				return sqlite.AuthorizerOK
			}
			return authorizeReading(action, arg1, arg2, database, trigger)
		})
	})
}

// checkStatement refuses what is not one reading statement, before SQLite sees it.
func checkStatement(statement string) error {
	first, rest := splitStatement(statement)
	if strings.TrimSpace(rest) != "" {
		return fmt.Errorf("one statement only: %q follows the first (%w)", clip(strings.TrimSpace(rest)), ErrNotReading)
	}
	word := strings.ToUpper(firstWord(first))
	switch word {
	case "":
		if strings.TrimSpace(stripComments(first)) == "" {
			return errors.New("the SQL statement is empty")
		}
	case "INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER", "ATTACH", "DETACH", "VACUUM",
		"REINDEX", "ANALYZE", "BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE":
		return fmt.Errorf("%s is not allowed: %w (SELECT, WITH, VALUES, EXPLAIN, PRAGMA)", word, ErrNotReading)
	}
	return nil // SELECT and its kin; a misspelt keyword gets SQLite's syntax error
}

// splitStatement cuts statement after its first ';' outside quotes and comments; rest holds
// what follows, with comments and blanks removed.
func splitStatement(s string) (first, rest string) {
	i := 0
	for i < len(s) {
		switch c := s[i]; {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(s, i, c)
		case c == '[':
			i = skipQuoted(s, i, ']')
		case strings.HasPrefix(s[i:], "--"):
			i = skipTo(s, i, "\n")
		case strings.HasPrefix(s[i:], "/*"):
			i = skipTo(s, i+2, "*/")
		case c == ';':
			return s[:i], stripComments(s[i+1:])
		default:
			i++
		}
	}
	return s, ""
}

func skipQuoted(s string, i int, close byte) int {
	for j := i + 1; j < len(s); j++ {
		if s[j] == close {
			if j+1 < len(s) && s[j+1] == close && close != ']' { // a doubled quote is one quote
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}

func skipTo(s string, i int, end string) int {
	if k := strings.Index(s[i:], end); k >= 0 {
		return i + k + len(end)
	}
	return len(s)
}

// stripComments removes comments from the text after the first statement (quotes there are
// a second statement anyway).
func stripComments(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "--"):
			i = skipTo(s, i, "\n")
		case strings.HasPrefix(s[i:], "/*"):
			i = skipTo(s, i+2, "*/")
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

// firstWord is the statement's first keyword, after blanks, comments and parentheses.
func firstWord(s string) string {
	s = strings.TrimLeft(stripComments(s), " \t\r\n(")
	end := strings.IndexFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_') })
	if end < 0 {
		return s
	}
	return s[:end]
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
