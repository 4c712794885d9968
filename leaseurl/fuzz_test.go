// Fuzzing store URLs: Redact and Open never panic, and neither the redacted
// form nor an Open error ever contains the URL's password.

package leaseurl_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/leasekit/lease/leaseurl"
)

// fuzzSchemes are the schemes FuzzOpen exercises: every one that opens
// without touching the file system (file:// would create directories) and
// without waiting: etcd:// is left out because its Open blocks for the 5 s
// dial timeout on an unreachable endpoint, even with a cancelled ctx.
var fuzzSchemes = []string{"redis", "rediss", "postgres", "postgresql", "zk", "mem", "REDIS", "nope", "",
	"redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"}

// leaks reports whether out shows password pw (raw or escaped) more often
// than each of the baselines (the URL with the password left out, as given
// or as Redact writes it) does: a password that is also the user name, a
// path segment or a fragment may legitimately appear, raw or re-escaped.
func leaks(out, pw string, baselines ...string) bool {
	if len(pw) < 4 {
		return false // too short to tell apart from other text
	}
	forms := []string{pw, url.QueryEscape(pw), url.PathEscape(pw), url.UserPassword("", pw).String()[1:]}
	for _, f := range forms {
		if len(f) < 4 {
			continue
		}
		most := 0
		for _, b := range baselines {
			most = max(most, strings.Count(b, f))
		}
		if strings.Count(out, f) > most {
			return true
		}
	}
	return false
}

// fuzzURL builds a URL from its parts twice: with and without the password.
func fuzzURL(scheme, user, pw, host, path, query string, escaped bool) (withPW, withoutPW string) {
	if escaped {
		u := url.URL{Scheme: scheme, User: url.UserPassword(user, pw), Host: host, Path: path, RawQuery: query}
		withPW = u.String()
		u.User = url.User(user)
		return withPW, u.String()
	}
	rest := host + path
	if query != "" {
		rest += "?" + query
	}
	return scheme + "://" + user + ":" + pw + "@" + rest, scheme + "://" + user + ":@" + rest
}

func addSeeds(f *testing.F) {
	f.Add("redis", "", "s3cr3t-PW", "127.0.0.1:6379", "/0", "prefix=a:", true)
	f.Add("rediss", "user", "p@ss:w/rd#?", "127.0.0.1:6380", "", "", false)
	f.Add("postgres", "u", "s3cr3t-PW", "127.0.0.1:5432", "/db", "sslmode=disable&password=s3cr3t-PW", true)
	f.Add("etcd", "root", "s3cr3t-PW", "127.0.0.1:2379,127.0.0.1:2380", "/app/", "", true)
	f.Add("zk", "digest", "s3cr3t-PW", "127.0.0.1:2181", "/chroot", "session_timeout=1s", false)
	f.Add("postgres", "u", "pa ss'word", "127.0.0.1", "/db", "sslpassword='pa ss'word'", false)
	f.Add("redis", "u", "%zz%", "[::1", "", "", false)
	f.Add("mem", "", "s3cr3t-PW", "name", "", "prefix=x&migrate=maybe", true)
	f.Add("redis+cluster", "", "s3cr3t-PW", "127.0.0.1:7000,127.0.0.1:7001", "", "prefix=a:&replica_ack=1", true)
	f.Add("rediss+sentinel", "u", "p@ss:w/rd#?", "127.0.0.1:26379,127.0.0.1:26380", "/mymaster/2", "sentinel_password=s3cr3t-PW", false)
	f.Add("redis+sentinel", "", "s3cr3t-PW", "127.0.0.1:26379", "/m", "sentinel_username=s&sentinel_password=s3cr3t-PW&replica_ack_timeout=1s", true)
}

func FuzzRedact(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, scheme, user, pw, host, path, query string, escaped bool) {
		withPW, withoutPW := fuzzURL(scheme, user, pw, host, path, query, escaped)
		out := leaseurl.Redact(withPW)
		// Against the password-less URL redacted too: Redact re-escapes
		// the parts it keeps (a fragment "pa s" comes out as "pa%20s"),
		// which must not count as showing a password of the same text.
		// And against the URL whose password is the mask itself, redacted:
		// a password that is part of the mask ("xxxx") shows in the mask
		// without leaking, while one that only overlaps it ("axxxxx") does
		// not appear there.
		withMask, _ := fuzzURL(scheme, user, leaseurl.Redacted, host, path, query, escaped)
		if leaks(out, pw, withoutPW, leaseurl.Redact(withoutPW), leaseurl.Redact(withMask)) {
			t.Fatalf("Redact(%q) = %q shows the password %q", withPW, out, pw)
		}
		for _, p := range []string{"password", "sslpassword", "sentinel_password"} {
			if v := "leak-" + pw; len(pw) >= 4 && !strings.Contains(withoutPW, v) {
				in := "postgres://h/db?" + p + "=" + url.QueryEscape(v)
				if got := leaseurl.Redact(in); strings.Contains(got, v) || strings.Contains(got, url.QueryEscape(v)) {
					t.Fatalf("Redact(%q) = %q shows the %s parameter", in, got, p)
				}
			}
		}
	})
}

// loopbackOnly reports whether every host of raw is a literal loopback or
// unspecified address (no DNS lookup, nothing leaves the machine).
func loopbackOnly(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return true // Open fails while parsing, before any connection
	}
	return strings.Trim(u.Host, "0123456789.:,[]") == "" && !strings.Contains(u.Host, "..") &&
		(u.Host == "" || strings.HasPrefix(u.Host, "127.0.0.1"))
}

func FuzzOpen(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, scheme, user, pw, host, path, query string, escaped bool) {
		ok := false
		for _, s := range fuzzSchemes {
			ok = ok || s == scheme
		}
		if !ok {
			return
		}
		// Port 1 on loopback: nothing listens, every dial fails at once.
		withPW, withoutPW := fuzzURL(scheme, user, pw, "127.0.0.1:1"+host, path, query, escaped)
		if !loopbackOnly(withPW) {
			return
		}
		// An already cancelled context: openers that connect give up at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		s, err := leaseurl.Open(ctx, withPW)
		if err == nil {
			_ = s.Close()
			return
		}
		if leaks(err.Error(), pw, withoutPW) {
			t.Fatalf("Open(%q) error %q shows the password %q", withPW, err, pw)
		}
	})
}
