package web

import (
	"strconv"
	"time"

	"github.com/redrive/redrive"
)

// chart is a bar chart of failures over time, drawn by the template as inline SVG with
// attributes only (the Content-Security-Policy allows no inline style).
type chart struct {
	Width, Height int
	// PlotTop and PlotBottom bound the bars vertically; the axis labels sit around them.
	PlotTop, PlotBottom int
	Bars                []bar
	// YTicks are the horizontal grid lines; XLabels the time labels under the bars.
	YTicks  []tick
	XLabels []tick
	Total   int64
	Label   string
}

// bar is one bucket's bar.
type bar struct {
	X, Y, W, H int
	Count      int64
	Title      string
}

// tick is an axis label at a position.
type tick struct {
	Pos   int
	Label string
}

// Geometry of the chart, in SVG user units.
const (
	chartWidth  = 720
	chartHeight = 200
	chartLeft   = 44
	chartRight  = 8
	chartTop    = 10
	chartBottom = 176
)

// newChart lays out buckets of the given width as bars.
func newChart(buckets []redrive.TimeBucket, width time.Duration) chart {
	c := chart{Width: chartWidth, Height: chartHeight, PlotTop: chartTop, PlotBottom: chartBottom}
	var peak int64
	for _, b := range buckets {
		c.Total += b.Count
		peak = max(peak, b.Count)
	}
	c.Label = "Failures received per " + humanDuration(width) + ": " + strconv.FormatInt(c.Total, 10) + " in total"
	top := niceCeil(peak)
	plotW := chartWidth - chartLeft - chartRight
	plotH := chartBottom - chartTop
	for i := 0; i <= 4; i++ {
		v := top * int64(i) / 4
		c.YTicks = append(c.YTicks, tick{Pos: chartBottom - int(int64(plotH)*v/top), Label: strconv.FormatInt(v, 10)})
	}
	n := len(buckets)
	if n == 0 {
		return c
	}
	slot := plotW / n
	gap := max(1, slot/6)
	every := max(1, (n+5)/6) // at most about six time labels
	for i, b := range buckets {
		h := int(int64(plotH) * b.Count / top)
		if b.Count > 0 && h < 1 {
			h = 1
		}
		x := chartLeft + i*slot
		c.Bars = append(c.Bars, bar{
			X: x + gap/2, Y: chartBottom - h, W: max(1, slot-gap), H: h, Count: b.Count,
			Title: b.Start.UTC().Format("2006-01-02 15:04") + "Z: " + strconv.FormatInt(b.Count, 10),
		})
		if i%every == 0 {
			c.XLabels = append(c.XLabels, tick{Pos: x + slot/2, Label: bucketLabel(b.Start, width)})
		}
	}
	return c
}

// bucketLabel names a bucket's start: the time of day for buckets under a day, else the date.
func bucketLabel(t time.Time, width time.Duration) string {
	if width < 24*time.Hour {
		return t.UTC().Format("15:04")
	}
	return t.UTC().Format("01-02")
}

// niceCeil returns the smallest of 4, 8, 12, 20, 40, 60, 80, 120, 200, ... that is at least v:
// a scale top that divides into four whole ticks.
func niceCeil(v int64) int64 {
	if v <= 4 {
		return 4
	}
	for base := int64(1); ; base *= 10 {
		for _, m := range []int64{4, 8, 12, 20, 40, 60, 80} {
			if m*base >= v {
				return m * base
			}
		}
	}
}
