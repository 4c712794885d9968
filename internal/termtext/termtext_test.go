package termtext

import "testing"

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"host:42":                  "host:42",
		"héllo wörld ✓ 日本 \uFFFD":  "héllo wörld ✓ 日本 \uFFFD",
		"x\nstatus: free\n\x1b[2J": `x\nstatus: free\n\x1b[2J`,
		"a\tb\rc\x00d\x7fe":        `a\tb\rc\x00d\x7fe`,
		"csi\u009b2J nel\u0085":    `csi\u009b2J nel\u0085`,
		"bad\xffutf8\xc3":          `bad\xffutf8\xc3`,
		`back\slash "quoted"`:      `back\slash "quoted"`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestJSON(t *testing.T) {
	in := "{\"h\":\"a\u007fb\u009bc\u0085 ✓\"}\n"
	want := `{"h":"a\u007fb\u009bc\u0085 ✓"}` + "\n"
	if got := string(JSON([]byte(in))); got != want {
		t.Errorf("JSON(%q) = %q, want %q", in, got, want)
	}
}
