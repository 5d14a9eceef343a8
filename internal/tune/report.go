package tune

import (
	"encoding/csv"
	"fmt"
	"html"
	"io"
	"strconv"
	"time"
)

// WriteCSV writes one row per trial: grid, block, shared memory, median
// kernel time in microseconds, launches timed, verified, recorded, why
// rejected.
func WriteCSV(w io.Writer, trials []Trial) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "shared_mem", "median_us", "repeats", "verified", "recorded", "rejected_why"}); err != nil {
		return err
	}
	for _, t := range trials {
		c := t.Config
		median := ""
		if t.Median > 0 {
			median = strconv.FormatFloat(us(t.Median), 'f', 3, 64)
		}
		row := []string{u(c.Grid.X), u(c.Grid.Y), u(c.Grid.Z), u(c.Block.X), u(c.Block.Y), u(c.Block.Z), u(c.SharedMem),
			median, strconv.Itoa(t.Repeats), strconv.FormatBool(t.Verified), strconv.FormatBool(t.Recorded), t.Why}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func u(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// WriteSVG draws a horizontal bar per trial, its median kernel time:
// verified shapes in green, the recorded one in blue, the fastest verified
// one marked, rejected ones grey with the reason. The file is standalone
// SVG that any browser opens offline.
func WriteSVG(w io.Writer, title string, trials []Trial) error {
	const (
		left, right, top, rowH, width = 260, 140, 40, 18, 900
	)
	best, haveBest := Best(trials)
	var longest time.Duration
	for _, t := range trials {
		longest = max(longest, t.Median)
	}
	height := top + rowH*len(trials) + 30
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="10" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	barMax := float64(width - left - right)
	for i, t := range trials {
		y := top + i*rowH
		label := t.Label()
		if t.Recorded {
			label += " (recorded)"
		}
		p(`<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+13, html.EscapeString(label))
		color, note := "#2e7d32", ""
		switch {
		case t.Recorded:
			color = "#1565c0"
		case !t.Verified:
			color, note = "#9e9e9e", "rejected: "+t.Why
		}
		if haveBest && t.Verified && t.Config == best.Config {
			note = "fastest verified"
		}
		barW := 0.0
		if longest > 0 {
			barW = barMax * float64(t.Median) / float64(longest)
		}
		p(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`+"\n", left, y+2, barW, rowH-4, color, html.EscapeString(t.Why))
		value := "did not run"
		if t.Median > 0 {
			value = fmt.Sprintf("%.2f µs", us(t.Median))
		}
		p(`<text x="%.1f" y="%d">%s %s</text>`+"\n", float64(left)+barW+6, y+13, value, html.EscapeString(truncate(note, 60)))
	}
	p(`<text x="10" y="%d" fill="#555">median kernel time per launch shape (CUDA events); green: output verified against the recording, grey: rejected, blue: recorded shape</text>`+"\n", height-10)
	_, err := io.WriteString(w, "</svg>\n")
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
