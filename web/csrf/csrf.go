// Package csrf protects every form of the web UI against cross-site
// request forgery. Each browser gets a random token in an HttpOnly,
// SameSite=Strict cookie; every form carries it in a hidden field (htmx
// requests may send it as a header instead), and an unsafe request whose
// field does not match the cookie, compared in constant time, is refused.
// Requests the browser marks as cross-site (Sec-Fetch-Site) are refused
// before that.
package csrf

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
)

// Names of the cookie, the form field and the header.
const (
	CookieName = "bindery_csrf"
	FieldName  = "csrf"
	HeaderName = "X-CSRF-Token"
)

type ctxKey struct{}

// Token returns the request's CSRF token, for forms to carry.
func Token(ctx context.Context) string {
	s, _ := ctx.Value(ctxKey{}).(string)
	return s
}

// Protect wraps next: it gives the browser a token when it has none and
// checks the token of every request that is not GET, HEAD or OPTIONS.
// refuse writes the answer to a forged request.
func Protect(next http.Handler, refuse func(http.ResponseWriter, *http.Request, string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := ""
		if c, err := r.Cookie(CookieName); err == nil && len(c.Value) == 43 {
			token = c.Value
		}
		safe := r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions
		if !safe {
			if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
				refuse(w, r, "The request came from another site.")
				return
			}
			sent := r.Header.Get(HeaderName)
			if sent == "" {
				sent = r.PostFormValue(FieldName)
			}
			if token == "" || subtle.ConstantTimeCompare([]byte(sent), []byte(token)) != 1 {
				refuse(w, r, "The form has expired or did not come from this site: reload the page and try again.")
				return
			}
		}
		if token == "" {
			raw := make([]byte, 32)
			if _, err := rand.Read(raw); err != nil {
				http.Error(w, "no randomness", http.StatusInternalServerError)
				return
			}
			token = base64.RawURLEncoding.EncodeToString(raw)
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", HttpOnly: true,
				Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, token)))
	})
}
