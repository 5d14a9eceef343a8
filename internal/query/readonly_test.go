package query

import (
	"errors"
	"testing"
)

func TestCheckStatement(t *testing.T) {
	for _, ok := range []string{
		"SELECT 1", "select ';' AS semi", "SELECT 1;", "SELECT 1; -- done", "SELECT 1; /* done */ ",
		`SELECT "a;b" FROM launches`, "SELECT [x;y] FROM t", "WITH a AS (SELECT 1) SELECT * FROM a",
		"(SELECT 1)", "SELECT 'it''s; fine'", "SELEC 1", "-1 AS a", "*", // a typo is SQLite's to report
	} {
		if err := checkStatement(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"SELECT 1; SELECT 2", "SELECT 1;DROP TABLE launches", "ATTACH 'x.db' AS x", "  -- c\n vacuum into 'f'",
		"INSERT INTO launches VALUES (1)", "/* x */ CREATE TABLE t(a)", "SELECT ';'; DELETE FROM launches",
	} {
		if err := checkStatement(bad); !errors.Is(err, ErrNotReading) {
			t.Errorf("%q: %v, want a refusal", bad, err)
		}
	}
	if err := checkStatement("  -- nothing\n"); err == nil || errors.Is(err, ErrNotReading) {
		t.Errorf("empty statement: %v", err)
	}
}
