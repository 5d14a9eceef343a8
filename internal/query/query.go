package query

import "context"

// RowWriter receives a query's result: the column names once, then each
// row. Values are int64, float64, string, []byte or nil (NULL); the slice
// is reused for the next row, so copy what you keep.
type RowWriter interface {
	Columns(names []string) error
	Row(values []any) error
}

// Query runs one SQL statement and streams its result to w. The error is
// SQLite's message when the statement is wrong.
func (db *DB) Query(ctx context.Context, statement string, w RowWriter) error {
	if err := db.fillChunks(ctx, statement); err != nil {
		return err
	}
	rows, err := db.db.QueryContext(ctx, statement)
	if err != nil {
		return err
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
