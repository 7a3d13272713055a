// Package session keeps a signed-in browser's session id in a cookie: an
// HttpOnly, SameSite=Strict cookie, Secure when the request came over TLS.
// The id is all the browser holds; what it stands for lives on the server
// (the catalog's web sessions), so an API token never reaches the browser
// after sign-in.
package session

import (
	"net/http"
	"time"
)

// CookieName is the name of the session cookie.
const CookieName = "bindery_session"

// ID returns the session id the request carries, or "".
func ID(r *http.Request) string {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

// Set gives the browser the session id for ttl.
func Set(w http.ResponseWriter, r *http.Request, id string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: id, Path: "/", MaxAge: int(ttl / time.Second),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

// Clear removes the session cookie.
func Clear(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}
