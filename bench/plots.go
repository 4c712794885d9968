// PNG plots of the results (gonum/plot): grouped horizontal bar charts.

package main

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// series is one bar group member: a name and one value per label.
type series struct {
	name   string
	values []float64
}

// hbar draws grouped horizontal bars, one row per label.
func hbar(path, title, xlabel string, labels []string, ss []series, xmin float64) error {
	if len(labels) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	w := vg.Points(10)
	if len(ss) > 1 {
		w = vg.Points(7)
	}
	for i, s := range ss {
		b, err := plotter.NewBarChart(plotter.Values(s.values), w)
		if err != nil {
			return err
		}
		b.Horizontal = true
		b.LineStyle.Width = 0
		b.Color = plotutil.Color(i)
		b.Offset = vg.Length(float64(i)-float64(len(ss)-1)/2) * w
		p.Add(b)
		if len(ss) > 1 {
			p.Legend.Add(s.name, b)
		}
	}
	// Room on the right for the legend; xmin > 0 zooms in (fail-over times).
	mx := 0.0
	for _, s := range ss {
		for _, v := range s.values {
			mx = max(mx, v)
		}
	}
	if mx > 0 {
		p.X.Max = xmin + (mx-xmin)*1.25
	}
	if xmin > 0 {
		p.X.Min = xmin
	}
	p.Legend.Top = true
	p.NominalY(labels...)
	p.Add(plotter.NewGrid())
	h := vg.Length(len(labels)*len(ss))*w*1.6 + 2*vg.Inch
	return p.Save(7*vg.Inch, h, path)
}

func writePlots(dir string, rs []Result) ([]string, error) {
	var files []string
	save := func(name, title, xlabel string, labels []string, ss []series, xmin float64) error {
		path := filepath.Join(dir, name)
		if err := hbar(path, title, xlabel, labels, ss, xmin); err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		if len(labels) > 0 {
			files = append(files, name)
		}
		return nil
	}
	label := func(r Result) string { return r.System + " / " + r.Store }
	pick := func(scn string) []Result {
		var out []Result
		for _, r := range rs {
			if r.Scenario == scn && r.Skipped == "" {
				out = append(out, r)
			}
		}
		// gonum draws the first label at the bottom: reverse for reading order.
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
	val := func(p *float64) float64 {
		if p == nil {
			return 0
		}
		return *p
	}

	cyc := pick("cycle")
	var l []string
	var ops []float64
	for _, r := range cyc {
		l, ops = append(l, label(r)), append(ops, r.OpsPerS)
	}
	if err := save("cycle.png", "Uncontended acquire+release, one client", "cycles/s", l, []series{{"cycles/s", ops}}, 0); err != nil {
		return files, err
	}

	con := pick("contention")
	l, ops = nil, nil
	var ho, retake, wp99, wmax []float64
	for _, r := range con {
		l = append(l, label(r))
		ops = append(ops, r.OpsPerS)
		ho = append(ho, val(r.HandoffOtherP50Ms))
		retake = append(retake, val(r.RetakePct))
		wp99 = append(wp99, val(r.WaitP99Ms))
		wmax = append(wmax, val(r.WaitMaxMs))
	}
	if err := save("contention-throughput.png", "16 workers, one key, 1 ms hold: acquisitions/s", "acquisitions/s", l, []series{{"acq/s", ops}}, 0); err != nil {
		return files, err
	}
	if err := save("contention-fairness.png", "Share of acquisitions re-taken by the releaser (FIFO: ~0%, random: 6.25%)", "%", l, []series{{"retake %", retake}}, 0); err != nil {
		return files, err
	}
	if err := save("contention-handoff.png", "Hand-off from a release to another worker, p50", "ms", l,
		[]series{{"hand-off p50", ho}}, 0); err != nil {
		return files, err
	}
	if err := save("contention-wait.png", "Acquire wait under contention", "ms", l,
		[]series{{"wait p99", wp99}, {"wait max", wmax}}, 0); err != nil {
		return files, err
	}

	fo := pick("failover")
	l = nil
	var p50, p99 []float64
	for _, r := range fo {
		l = append(l, label(r))
		p50 = append(p50, val(r.P50Ms))
		p99 = append(p99, val(r.P99Ms))
	}
	// Zoom in on the interesting range: from 100 ms below the fastest.
	lo := 1900.0
	for _, v := range p50 {
		if v > 0 {
			lo = min(lo, v)
		}
	}
	lo = max(0, float64(int((lo-100)/100))*100)
	if err := save("failover.png", "Crash fail-over, TTL 2 s: holder acquisition to next holder", fmt.Sprintf("ms (axis from %.0f)", lo), l,
		[]series{{"p50", p50}, {"p99", p99}}, lo); err != nil {
		return files, err
	}
	return files, nil
}
