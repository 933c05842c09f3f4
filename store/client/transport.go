package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"github.com/hashicorp/go-cleanhttp"

	"github.com/memfs/memfs/store"
)

// NewTransport returns the transport a Client sends its requests with: a
// pooled transport of github.com/hashicorp/go-cleanhttp that trusts the
// system's roots plus, when caFile is not "", every PEM certificate in
// caFile (a private CA, or memfs serve's self-signed certificate). A file
// that can't be read, or that holds no PEM certificate, is an error.
//
// Code that talks to memfs serve with another HTTP client (a proxy, an
// SDK) uses it to trust the same certificates as the Client does.
func NewTransport(caFile string) (*http.Transport, error) {
	tr := cleanhttp.DefaultPooledTransport()
	if caFile == "" {
		return tr, nil
	}
	pool, err := certPool(caFile)
	if err != nil {
		return nil, err
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}

// certPool is the system's roots plus the PEM certificates of caFile.
func certPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("client: the CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		// No system roots (a bare container): the file's alone.
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("client: the CA file %s holds no PEM certificate (want one or more -----BEGIN CERTIFICATE----- blocks)", caFile)
	}
	return pool, nil
}

// CertificateError is a server whose TLS certificate the client does not
// trust (unknown authority, wrong host name, expired). Asking again gets
// the same answer until the server's certificate or the client's CA file
// changes. It comes wrapped with a store.ErrUnavailable *store.Error, so
// that a sync engine waits for it as for an outage, while a command can
// end on it (errors.As).
type CertificateError struct {
	// URL is the server's base URL.
	URL string
	// Err is the verification error (a *tls.CertificateVerificationError).
	Err error
}

func (e *CertificateError) Error() string {
	return fmt.Sprintf("the TLS certificate of %s is not trusted (%v): give the certificate of the CA that signed it, or the certificate itself, as the CA file (--ca-file, MEMFS_CA_FILE)", e.URL, e.Err)
}

func (e *CertificateError) Unwrap() error { return e.Err }

// noAnswer is the error of a request that got no answer from the server
// at base: a *store.Error of kind store.ErrUnavailable wrapping err, and a
// *CertificateError too when the server's certificate is not trusted.
func noAnswer(base, what string, err error) error {
	se := &store.Error{Kind: store.ErrUnavailable, Message: fmt.Sprintf("%s: no answer from the server at %s", what, base)}
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		se.Message = what
		return fmt.Errorf("%w: %w", se, &CertificateError{URL: base, Err: cv})
	}
	return fmt.Errorf("%w: %w", se, err)
}

// InsecureHTTPError refuses a plain http:// BaseURL whose host is not a
// loopback address: the API key would cross the network readable by
// anyone on the path. Options.AllowInsecureHTTP lifts the refusal.
type InsecureHTTPError struct {
	// Host is the URL's host, as written (without the port).
	Host string
}

func (e *InsecureHTTPError) Error() string {
	return fmt.Sprintf("client: refusing to send an API key over plain http:// to %s, which is not a loopback address (localhost, 127.0.0.0/8, ::1): anyone on the network between could read it", e.Host)
}

// CheckBaseURL checks that baseURL is an http:// or https:// URL with a
// host and neither query nor fragment, and, unless allowInsecureHTTP,
// that an http:// one names a loopback host (else an *InsecureHTTPError).
// Options.Validate calls it; so can code that takes a URL long before it
// makes a Client, to refuse it at once.
func CheckBaseURL(baseURL string, allowInsecureHTTP bool) error {
	u, err := url.Parse(baseURL)
	if err != nil {
		return fmt.Errorf("client: BaseURL %q is not a URL (want e.g. http://127.0.0.1:8080): %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("client: BaseURL %q must be an http:// or https:// URL with a host", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("client: BaseURL %q must not have a query or fragment", baseURL)
	}
	if u.Scheme == "http" && !allowInsecureHTTP && !loopbackHost(u.Hostname()) {
		return &InsecureHTTPError{Host: u.Hostname()}
	}
	return nil
}

// loopbackHost says whether host (a URL's, without port or brackets)
// names this machine without a lookup: "localhost", an IPv4 address in
// 127.0.0.0/8 or ::1 (also as an IPv4-mapped address). Any other name is
// not, even one that resolves to a loopback address: what DNS answers may
// change between this check and the connection.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return false
	}
	return ip.Unmap().IsLoopback()
}
