package htmlreport

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/onnxpe/onnxpe/passes"
)

// chromium finds Debian's chromium (or ONNXPE_CHROMIUM). Without it the
// browser tests fail under CI and are skipped, with the reason, elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ONNXPE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (apt-get install chromium); CI must run the browser tests of the HTML report")
	}
	t.Skip("chromium is not installed (apt-get install chromium): the HTML report was not opened in a browser")
	return ""
}

// browser starts headless Chromium with a fresh profile and no network
// chatter of its own.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-device-scale-factor", "1"),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1300, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	// The first run starts the browser; it must not have a deadline.
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("starting chromium: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("chromium did not start in 60 s")
	}
	return ctx
}

// pageCheck is a page and the plots it must show in the browser.
type pageCheck struct {
	name    string
	reports []*passes.Report
	plots   []string
}

// TestReportInBrowser opens the HTML reports of a RoPE model, an ALiBi
// model and a page of every scheme in headless Chromium: no console
// errors, exceptions or requests; every plot is laid out with a size and
// its picture (the screenshot) has many colours, not a blank box. Set
// ONNXPE_SCREENSHOTS=DIR to keep the screenshots.
func TestReportInBrowser(t *testing.T) {
	ctx := browser(t)
	var all []*passes.Report
	for _, n := range []string{"rope_yarn", "sinusoidal_interleaved", "learned_bert", "t5_decoder", "relative_shaw", "llama4_nope"} {
		all = append(all, auditCorpus(t, n))
	}
	var family []*passes.Report
	for _, n := range []string{"relative_transfo_xl", "disentangled_deberta", "rope_mrope", "rope_axial_vit", "complex_order", "floater_loop"} {
		family = append(family, auditCorpus(t, n))
	}
	pages := []pageCheck{
		{"rope", []*passes.Report{auditCorpus(t, "rope_llama3")}, []string{"layer_map", "rope_cos_sin", "rope_frequencies"}},
		{"alibi", []*passes.Report{auditCorpus(t, "alibi_bloom")}, []string{"layer_map", "alibi_slopes"}},
		{"schemes", all, []string{"layer_map", "rope_cos_sin", "rope_frequencies", "table_heatmap", "sinusoidal_frequencies",
			"position_similarity", "t5_bucket_map", "t5_bias", "t5_table", "shaw_clipping"}},
		{"family", family, []string{"layer_map", "relative_table", "relative_distances", "disentangled_buckets", "rope_cos_sin",
			"rope_frequencies", "rope_sections", "rope_axes", "complex_frequencies", "floater_states"}},
	}
	for _, pc := range pages {
		t.Run(pc.name, func(t *testing.T) { checkInBrowser(t, ctx, pc) })
	}
}

func checkInBrowser(t *testing.T, ctx context.Context, pc pageCheck) {
	dir := t.TempDir()
	path := filepath.Join(dir, pc.name+".html")
	if err := os.WriteFile(path, []byte(render(t, pc.reports...)), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "file://" + path
	tab, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()
	var mu sync.Mutex
	var problems []string
	err := chromedp.Listen(tab, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, fmt.Sprintf("exception: %s (line %d)", ev.ExceptionDetails.Text, ev.ExceptionDetails.LineNumber))
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Level == cdplog.EntryLevelWarning {
				problems = append(problems, fmt.Sprintf("log %s (%s): %s %s", ev.Entry.Level, ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			if u := ev.Request.URL; u != url && !strings.HasPrefix(u, "data:") {
				problems = append(problems, "request: "+u)
			}
		case *network.EventLoadingFailed:
			problems = append(problems, "loading failed: "+ev.ErrorText)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(tab, 60*time.Second)
	defer cancel()
	if _, err := chromedp.Call(rctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(rctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	type rect struct {
		X float64 `json:"x"`
		Y float64 `json:"y"`
		W float64 `json:"w"`
		H float64 `json:"h"`
	}
	type box struct {
		Kind   string `json:"kind"`
		rect          // the whole image
		Shapes int    `json:"shapes"`
		// Frames are the plot areas of charts; Cells the heat maps' pictures.
		Frames []rect `json:"frames"`
		Cells  []rect `json:"cells"`
	}
	if err := chromedp.Do(rctx,
		chromedp.Navigate(url),
		chromedp.WaitReady(chromedp.CSS("footer")),
		// Open every list of nodes: what is collapsed must render too.
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("details").forEach(d => d.open = true)`),
	); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(rctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	boxes, err := chromedp.Run(rctx, chromedp.Evaluate[[]box](`(() => {
		const at = e => { const r = e.getBoundingClientRect(); return {x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height}; };
		return [...document.querySelectorAll("figure svg.plot")].map(s => {
			let shapes = 0;
			s.querySelectorAll("path, circle, line, rect, image").forEach(e => {
				const b = e.getBoundingClientRect();
				if (b.width > 0 || b.height > 0) shapes++;
			});
			return Object.assign(at(s), {kind: s.parentElement.className.replace("fig-", ""), shapes: shapes,
				frames: [...s.querySelectorAll("rect.frame")].filter(f => !f.previousElementSibling || f.previousElementSibling.tagName != "image").map(at),
				cells: [...s.querySelectorAll("image.cells")].map(at)});
		});
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	imageWidths, err := chromedp.Run(rctx, chromedp.Evaluate[[]float64](`Promise.all([...document.querySelectorAll("svg.plot image")].map(i => {
		const im = new Image();
		im.src = i.getAttribute("href");
		return im.decode().then(() => im.naturalWidth, () => 0);
	}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(rctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("ONNXPE_SCREENSHOTS"); d != "" {
		if err := os.WriteFile(filepath.Join(d, pc.name+".png"), shot, 0o644); err != nil {
			t.Error(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // late console events
	mu.Lock()
	for _, p := range problems {
		t.Error(p)
	}
	mu.Unlock()
	if !strings.HasPrefix(title, "onnxpe audit") {
		t.Errorf("title %q", title)
	}
	for i, w := range imageWidths {
		if w == 0 {
			t.Errorf("heat map image %d does not decode", i)
		}
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	seen := map[string]bool{}
	for _, b := range boxes {
		seen[b.Kind] = true
		if b.W < 100 || b.H < 60 {
			t.Errorf("plot %s is %gx%g pixels", b.Kind, b.W, b.H)
			continue
		}
		if b.Shapes < 3 {
			t.Errorf("plot %s has %d visible shapes", b.Kind, b.Shapes)
		}
		// What is drawn has colours: the cells of a heat map many, the
		// plot area of a chart its series beside the grid, the whole
		// image text and axes; not an empty frame.
		inside := func(r rect, inset int) int {
			return distinctColors(img, image.Rect(int(r.X)+inset, int(r.Y)+inset, int(r.X+r.W)-inset, int(r.Y+r.H)-inset))
		}
		if n := inside(b.rect, 0); n < 24 {
			t.Errorf("plot %s at (%g, %g) shows %d distinct colours, want at least 24", b.Kind, b.X, b.Y, n)
		}
		// A heat map's cells: many colours, not an empty frame (12: the
		// sin panel of a 5 x 5 grid's 2-D RoPE holds 19 distinct values,
		// and how many blends its edges add depends on the page's width).
		for _, c := range b.Cells {
			if n := inside(c, 1); n < 12 {
				t.Errorf("heat map %s at (%g, %g) shows %d distinct colours in its cells, want at least 12", b.Kind, c.X, c.Y, n)
			}
		}
		for _, fr := range b.Frames {
			// The series are drawn in colour; grid, frame and reference
			// lines in greys.
			n := colouredPixels(img, image.Rect(int(fr.X)+2, int(fr.Y)+2, int(fr.X+fr.W)-2, int(fr.Y+fr.H)-2))
			if n < 40 {
				t.Errorf("chart %s at (%g, %g) has %d coloured pixels in its plot area, want at least 40", b.Kind, fr.X, fr.Y, n)
			}
		}
		if b.Kind != "layer_map" && len(b.Cells)+len(b.Frames) == 0 {
			t.Errorf("plot %s has neither a plot area nor heat map cells", b.Kind)
		}
	}
	for _, k := range pc.plots {
		if !seen[k] {
			t.Errorf("no %s plot in the browser", k)
		}
	}
	if len(boxes) == 0 {
		t.Error("no plots in the browser")
	}
}

// colouredPixels counts the pixels of img in r that are not grey.
func colouredPixels(img image.Image, r image.Rectangle) int {
	r = r.Intersect(img.Bounds())
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			hi, lo := max(cr, cg, cb)>>8, min(cr, cg, cb)>>8
			if hi-lo > 40 {
				n++
			}
		}
	}
	return n
}

// distinctColors counts the colours of the pixels of img in r.
func distinctColors(img image.Image, r image.Rectangle) int {
	r = r.Intersect(img.Bounds())
	seen := map[uint32]bool{}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			seen[cr>>8<<16|cg>>8<<8|cb>>8] = true
		}
	}
	return len(seen)
}
