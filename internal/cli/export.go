package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/export"
	"github.com/gpurr/gpurr/internal/info"
)

func newExportCmd() *cobra.Command {
	var dir, parquetDir, format string
	cmd := &cobra.Command{
		Use:   "export REC... -o DIR [--format parquet]",
		Short: "Write recordings as Parquet tables for Spark, Trino, DuckDB or pandas",
		Long: `export writes the recordings given as Parquet tables in DIR, which must not
exist or be empty: the tables of gpurr query, with the same names, columns,
types, NULLs and rows (gpurr query --schema, docs/query.md), so SQL written
for one runs on the other. Each table is a folder partitioned by host and
rank (TABLE/host=H/rank=R/PROCESS.parquet), which engines add as the
columns host and rank, so the recordings of every rank of a large job can
be queried together. --parquet DIR, the older spelling of -o DIR, still
works.`,
		Example: `  gpurr export job/rank* -o job-pq
  duckdb -c "SELECT rank, python_line, sum(duration_ns)/1e6 AS ms
             FROM read_parquet('job-pq/gpu_activity/*/*/*.parquet', hive_partitioning = true)
             GROUP BY 1, 2 ORDER BY ms DESC LIMIT 10"`,
		Args: positional(1, -1, "one or more recordings"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat("export", format, "parquet"); err != nil {
				return err
			}
			flag := "-o"
			if cmd.Flags().Changed("parquet") {
				if cmd.Flags().Changed("output") {
					return usageErrorf("export: -o and --parquet both name the folder: give -o alone")
				}
				flag, dir = "--parquet", parquetDir
				warnf(cmd, "--parquet DIR is the older spelling of -o DIR (--format parquet is the default)")
			}
			if dir == "" {
				return usageErrorf("export: -o DIR is required")
			}
			if err := checkOutFolder("export", flag, dir, args); err != nil {
				return err
			}
			procs, unreadable, err := openProcessesAndUnreadable(cmd, args)
			if err != nil {
				return err
			}
			st, err := export.Parquet(dir, procs, unreadable...)
			if err != nil {
				return usageErrorf("export: %v", err)
			}
			for _, short := range st.Shortfalls {
				warnf(cmd, "%s", short)
			}
			var parts []string
			for _, t := range export.Tables {
				if st.Rows[t] > 0 { // every table has its files; those without rows go unnamed
					parts = append(parts, fmt.Sprintf("%s %d", t, st.Rows[t]))
				}
			}
			if len(parts) == 0 {
				parts = []string{"none"}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s, %d files; rows: %s\n", dir, info.Count(len(procs), "process"), st.Files, strings.Join(parts, ", "))
			return nil
		},
	}
	f := cmd.Flags()
	outputVar(f, &dir, "output", "o", "", "folder to write the tables into (must not exist or be empty)")
	f.StringVar(&format, "format", "parquet", "format of the tables: parquet")
	completeValues(cmd, "format", "parquet")
	outputVar(f, &parquetDir, "parquet", "", "", "the older spelling of -o DIR")
	f.MarkHidden("parquet")
	addStepRangeFlag(cmd)
	return cmd
}
