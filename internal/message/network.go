package message

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
)

// Unreachable words why a request to a broker (or a server) at address
// did not get an answer, from the network error: what happened and what
// to check, rather than Go's dial error. An error that is no network
// error is given as it is, after the address.
func Unreachable(address string, err error) string {
	host := address
	if u, perr := url.Parse(address); perr == nil && u.Host != "" {
		host = u.Host
	}
	var dns *net.DNSError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case strings.Contains(err.Error(), "broker egress policy"):
		return fmt.Sprintf("Bindery may not connect to %s: %s. An operator can allow it with --broker-egress-allow (or --broker-allow-loopback for this machine).",
			host, strings.TrimSpace(afterLast(err.Error(), "broker egress policy:")))
	case errors.As(err, &dns):
		return fmt.Sprintf("The host name %q does not resolve: check the URL %s.", dns.Name, address)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("Nothing answers at %s (connection refused): check the URL and that the broker is running.", host)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return fmt.Sprintf("%s cannot be reached from Bindery's network: check the URL and the network between them.", host)
	case errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid):
		return fmt.Sprintf("The TLS certificate of %s is not trusted (%s): give the broker's CA bundle, or fix its certificate.", host, certProblem(err))
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("%s did not answer in time: check that the broker is running and not overloaded.", host)
	}
	return fmt.Sprintf("The request to %s failed: %v.", host, strings.TrimSuffix(err.Error(), "."))
}

func certProblem(err error) string {
	var hostname x509.HostnameError
	if errors.As(err, &hostname) {
		return fmt.Sprintf("it is not valid for %s", hostname.Host)
	}
	var invalid x509.CertificateInvalidError
	if errors.As(err, &invalid) && invalid.Reason == x509.Expired {
		return "it has expired"
	}
	return "signed by an unknown authority"
}

func afterLast(s, sep string) string {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[i+len(sep):]
	}
	return s
}

// Closest returns the candidate nearest to name by edit distance, when it
// is near enough to be a typo of it (at most a third of its length, and
// at least one edit), for "did you mean …"; "" when none is.
func Closest(name string, candidates []string) string {
	best, bestD := "", -1
	limit := max(1, len([]rune(name))/3)
	lower := strings.ToLower(name)
	for _, c := range candidates {
		d := distance(lower, strings.ToLower(c))
		if strings.HasPrefix(strings.ToLower(c), lower) && len(name) >= 2 {
			d = min(d, 1) // a prefix of it is as good as a typo
		}
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// DidYouMean is " Did you mean "x"?" for the closest candidate, or "".
func DidYouMean(name string, candidates []string) string {
	if c := Closest(name, candidates); c != "" && c != name {
		return fmt.Sprintf(" Did you mean %q?", c)
	}
	return ""
}
