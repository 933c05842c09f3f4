package deploy

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unitFile is a systemd unit file as systemd reads it: sections of
// Key=Value assignments, a key may repeat (After=, SystemCallFilter=), a
// line ending in a backslash continues on the next, # and ; start
// comments.
type unitFile struct {
	path     string
	sections map[string]map[string][]string
}

// parseUnit parses unit file text; a line that is neither a section, an
// assignment nor a comment is an error (systemd would ignore it with a
// warning, which hides a typo).
func parseUnit(path, text string) (*unitFile, error) {
	u := &unitFile{path: path, sections: map[string]map[string][]string{}}
	section := ""
	var pending string
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if pending == "" && (line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";")) {
			continue
		}
		if pending != "" && (strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";")) {
			continue // systemd skips comment lines inside a continuation
		}
		if strings.HasSuffix(line, "\\") {
			pending += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, pending = pending+line, ""
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			if u.sections[section] == nil {
				u.sections[section] = map[string][]string{}
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("%s:%d: not a section, an assignment or a comment: %q", path, i+1, raw)
		}
		k = strings.TrimSpace(k)
		u.sections[section][k] = append(u.sections[section][k], strings.TrimSpace(v))
	}
	if pending != "" {
		return nil, fmt.Errorf("%s: ends inside a continued line", path)
	}
	return u, nil
}

func readUnit(t *testing.T, path string) *unitFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u, err := parseUnit(path, string(b))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// get is the value systemd uses for a single-valued key: the last one.
func (u *unitFile) get(section, key string) string {
	vs := u.sections[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

func (u *unitFile) has(section, key string) bool { return len(u.sections[section][key]) > 0 }

// words is every whitespace-separated word of every assignment of a
// list-valued key (After=, SystemCallFilter=, CapabilityBoundingSet=); an
// empty assignment resets the list, as in systemd.
func (u *unitFile) words(section, key string) []string {
	var out []string
	for _, v := range u.sections[section][key] {
		if v == "" {
			out = nil
			continue
		}
		out = append(out, strings.Fields(v)...)
	}
	return out
}

var timespanPart = regexp.MustCompile(`^(\d+(?:\.\d+)?)([a-z]*)$`)

// parseTimespan reads a systemd time span ("45", "45s", "1min 30s",
// "2m"): a bare number is seconds. "infinity" is refused: a stop that
// never times out is not a bound.
func parseTimespan(s string) (time.Duration, error) {
	units := map[string]time.Duration{
		"": time.Second, "s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
		"ms": time.Millisecond, "msec": time.Millisecond, "us": time.Microsecond, "usec": time.Microsecond,
		"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
	}
	// "1min30s" is one span too: split between a unit and the next number.
	s = regexp.MustCompile(`([a-z])(\d)`).ReplaceAllString(strings.TrimSpace(s), "$1 $2")
	if s == "" {
		return 0, fmt.Errorf("empty time span")
	}
	var total time.Duration
	for _, part := range strings.Fields(s) {
		m := timespanPart.FindStringSubmatch(part)
		if m == nil {
			return 0, fmt.Errorf("time span %q: can't read %q", s, part)
		}
		unit, ok := units[m[2]]
		if !ok {
			return 0, fmt.Errorf("time span %q: unknown unit %q", s, m[2])
		}
		f, _ := strconv.ParseFloat(m[1], 64)
		total += time.Duration(f * float64(unit))
	}
	return total, nil
}

func TestParseTimespan(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"45": 45 * time.Second, "45s": 45 * time.Second, "1min 30s": 90 * time.Second,
		"1min30s": 90 * time.Second, "2m": 2 * time.Minute, "500ms": 500 * time.Millisecond,
	} {
		got, err := parseTimespan(in)
		if err != nil || got != want {
			t.Errorf("parseTimespan(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "infinity", "abc", "5 fortnights", "-3"} {
		if d, err := parseTimespan(bad); err == nil {
			t.Errorf("parseTimespan(%q) = %v, want an error", bad, d)
		}
	}
}

func TestParseUnit(t *testing.T) {
	u, err := parseUnit("x.service", "# c\n[Service]\nExecStart=/bin/a \\\n  # skipped\n  --b\nAfter=x\nAfter=y z\nCapabilityBoundingSet=CAP_A\nCapabilityBoundingSet=\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := u.get("Service", "ExecStart"); got != "/bin/a  --b" {
		t.Errorf("continued ExecStart = %q", got)
	}
	if got := u.words("Service", "After"); strings.Join(got, ",") != "x,y,z" {
		t.Errorf("After words = %q", got)
	}
	if got := u.words("Service", "CapabilityBoundingSet"); len(got) != 0 {
		t.Errorf("an empty assignment must reset the list, got %q", got)
	}
	for _, bad := range []string{"Key=outside a section\n", "[Service]\nno equals sign\n", "[Service]\n=value\n"} {
		if _, err := parseUnit("bad.service", bad); err == nil {
			t.Errorf("parseUnit(%q): want an error", bad)
		}
	}
}
