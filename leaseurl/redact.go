// Redaction of passwords in store URLs and in the errors Open returns.

package leaseurl

import (
	"errors"
	"net/url"
	"regexp"
	"strings"

	"github.com/leasekit/lease/internal/oneline"
)

// Redacted replaces passwords in redacted output.
const Redacted = "xxxxx"

// secretParams are query parameters whose values are secrets.
var secretParams = []string{"password", "sslpassword", "sentinel_password", "pass", "passwd", "secret", "token"}

var (
	// userinfo with a password, for text url.Parse cannot handle.
	userinfoRE = regexp.MustCompile(`(//[^/@:?#]*):[^/@?#]*@`)
	// key=value secrets in query strings or key/value DSNs.
	paramRE = regexp.MustCompile(`(?i)((?:^|[?&;\s])(?:` + strings.Join(secretParams, "|") + `)=)('[^']*'|[^&;\s#]*)`)
)

// Redact returns rawURL with its password, and the values of query
// parameters such as password= or sslpassword=, replaced by "xxxxx". It also
// handles text that is not a valid URL, so that it can be applied to any
// string a user gave as a store URL.
func Redact(rawURL string) string {
	if scheme, head, tail, ok := ambiguousUserinfo(rawURL); ok {
		if c := strings.Index(head, ":"); c >= 0 {
			head = head[:c+1] + Redacted
		}
		return scheme + head + "@" + paramRE.ReplaceAllString(tail, "${1}"+Redacted)
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Opaque != "" || u.Scheme == "" {
		return paramRE.ReplaceAllString(userinfoRE.ReplaceAllString(rawURL, "${1}:"+Redacted+"@"), "${1}"+Redacted)
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), Redacted)
	}
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for k := range q {
			if isSecretParam(k) {
				q[k] = []string{Redacted}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

// ambiguousUserinfo splits rawURL at the last '@' after "scheme://" when
// what precedes it contains '@', '/', '?' or '#': a user or password with
// such characters unescaped makes URL parsers end the user information early
// (or take it for a host, path or fragment), so which part is the password is
// ambiguous. Redaction then hides everything from the first ':' to the last
// '@', which may hide more than the password but never shows it. The same
// holds when the text before "://" is not a valid scheme ("a:#://u:pw@h"):
// a URL parser then reads the "user information" as a path or fragment and
// would keep it.
func ambiguousUserinfo(rawURL string) (scheme, head, tail string, ok bool) {
	i := strings.Index(rawURL, "://")
	if i < 0 {
		return "", "", "", false
	}
	rest := rawURL[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 || (validScheme(rawURL[:i]) && !strings.ContainsAny(rest[:at], "@/?#")) {
		return "", "", "", false
	}
	return rawURL[:i+3], rest[:at], rest[at+1:], true
}

// validScheme reports whether s is a URL scheme as RFC 3986 writes it: a
// letter, then letters, digits, '+', '-' or '.'.
func validScheme(s string) bool {
	for i, c := range s {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

func isSecretParam(k string) bool {
	for _, s := range secretParams {
		if strings.EqualFold(k, s) {
			return true
		}
	}
	return false
}

// secrets returns the secret strings in rawURL (its password and secret
// query values, raw and decoded) so that errors can be scrubbed of them.
func secrets(rawURL string) []string {
	var out []string
	add := func(s string) {
		if s != "" {
			out = append(out, s)
			if e := url.QueryEscape(s); e != s {
				out = append(out, e)
			}
			if e := url.PathEscape(s); e != s {
				out = append(out, e)
			}
		}
	}
	if u, err := url.Parse(rawURL); err == nil {
		if p, ok := u.User.Password(); ok {
			add(p)
		}
		for k, vs := range u.Query() {
			if isSecretParam(k) {
				for _, v := range vs {
					add(v)
				}
			}
		}
	}
	// An ambiguous user information: everything after its first ':'.
	if _, head, _, ok := ambiguousUserinfo(rawURL); ok {
		if c := strings.Index(head, ":"); c >= 0 {
			add(head[c+1:])
			if d, err := url.PathUnescape(head[c+1:]); err == nil {
				add(d)
			}
		}
	}
	// Whatever url.Parse made of it, also take the raw userinfo password.
	if m := regexp.MustCompile(`//[^/@:?#]*:([^/@?#]*)@`).FindStringSubmatch(rawURL); m != nil {
		add(m[1])
		if d, err := url.PathUnescape(m[1]); err == nil {
			add(d)
		}
	}
	for _, m := range paramRE.FindAllStringSubmatch(rawURL, -1) {
		add(strings.Trim(m[2], "'"))
	}
	return out
}

// redactedError scrubs secrets from an error's message. errors.Is and
// errors.As still see the original chain, but it has no Unwrap method, so
// printing errors.Unwrap(err) cannot reveal the password either.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string        { return e.msg }
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }
func (e *redactedError) As(target any) bool   { return errors.As(e.err, target) }

// scrub returns err with every secret of rawURL removed from its message,
// which it also puts on one line.
func scrub(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: oneline.Join(RedactText(err.Error(), rawURL)), err: err}
}

// RedactText returns text with every secret of the store URL rawURL (its
// password, raw and escaped, and the values of parameters such as password=)
// replaced by "xxxxx": for messages that may quote the URL or its password,
// such as a driver's log lines.
func RedactText(text, rawURL string) string {
	for _, s := range secrets(rawURL) {
		text = strings.ReplaceAll(text, s, Redacted)
	}
	return text
}
