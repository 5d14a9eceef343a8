package query

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// RowWriter receives a query's result: the column names once, then each
// row. Values are int64, float64, string, []byte or nil (NULL); the slice
// is reused for the next row, so copy what you keep.
type RowWriter interface {
	Columns(names []string) error
	Row(values []any) error
}

// sqliteCode is what SQLite's driver adds to its message: its category and result code.
var sqliteCode = regexp.MustCompile(`^SQL logic error: |\s\(\d+\)$`)

// sqliteMessage is SQLite's message without the driver's category and result code
// ("SQL logic error: near "SELEC": syntax error (1)" says: near "SELEC": syntax error).
func sqliteMessage(err error) error {
	msg := sqliteCode.ReplaceAllString(err.Error(), "")
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// Query runs one SQL statement and streams its result to w. The error is
// SQLite's message when the statement is wrong.
//
// It only reads (readonly.go): a statement that would write, attach a
// file, run a pragma that does more than list, or run a second statement
// is refused, wrapping ErrNotReading.
func (db *DB) Query(ctx context.Context, statement string, w RowWriter) error {
	return diskFull(db.query(ctx, statement, w))
}

func (db *DB) query(ctx context.Context, statement string, w RowWriter) error {
	if err := checkStatement(statement); err != nil {
		return err
	}
	if err := db.fillTables(ctx, statement); err != nil {
		return err
	}
	if err := db.fillChunks(ctx, statement); err != nil {
		return err
	}
	if !db.guarded {
		if err := db.readOnly(ctx); err != nil {
			return err
		}
		db.guarded = true
	}
	rows, err := db.db.QueryContext(ctx, statement)
	if full := diskFull(err); full != err { // a sort's temporary file, in the same folder
		return full
	}
	if err != nil {
		if strings.Contains(err.Error(), "not authorized") {
			return fmt.Errorf("the statement would write or change a setting: %w", ErrNotReading)
		}
		return sqliteMessage(err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return err
	}
	if err := w.Columns(names); err != nil {
		return err
	}
	values := make([]any, len(names))
	ptrs := make([]any, len(names))
	for i := range values {
		ptrs[i] = &values[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if err := w.Row(values); err != nil {
			return err
		}
	}
	return rows.Err()
}
