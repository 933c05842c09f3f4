package client

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memfs/memfs/store"
)

func TestLoopbackHost(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"LocalHost", true},
		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"127.255.255.255", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"0:0:0:0:0:0:0:1", true},
		// Names are not looked up: only the literal "localhost" counts.
		{"localhost.", false},
		{"localhost.example", false},
		{"foo.localhost", false},
		{"ip6-localhost", false},
		{"memfs.example", false},
		{"10.0.0.1", false},
		{"128.0.0.1", false},
		{"0.0.0.0", false},
		{"::", false},
		{"::2", false},
		{"fe80::1%lo", false},
		{"", false},
	} {
		if got := loopbackHost(tc.host); got != tc.want {
			t.Errorf("loopbackHost(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestCheckBaseURL(t *testing.T) {
	for _, tc := range []struct {
		url      string
		insecure bool
		refused  bool // an *InsecureHTTPError
	}{
		{"http://127.0.0.1:8080", false, false},
		{"http://localhost:8080/prefix", false, false},
		{"http://[::1]:8080", false, false},
		{"https://memfs.example", false, false},
		{"https://10.0.0.1:8443", false, false},
		{"http://10.0.0.1:1", false, true},
		{"http://memfs.example", false, true},
		{"http://[::2]:8080", false, true},
		{"HTTP://memfs.example", false, true},
		{"http://10.0.0.1:1", true, false},
		{"http://memfs.example", true, false},
	} {
		err := CheckBaseURL(tc.url, tc.insecure)
		var ie *InsecureHTTPError
		if got := errors.As(err, &ie); got != tc.refused || (!tc.refused && err != nil) {
			t.Errorf("CheckBaseURL(%q, %v) = %v, want refused %v", tc.url, tc.insecure, err, tc.refused)
		}
	}
}

// TestNewRefusesPlainHTTP checks that the refusal comes from New, before
// any request: the server at the URL is never reached.
func TestNewRefusesPlainHTTP(t *testing.T) {
	_, err := New(Options{BaseURL: "http://10.0.0.1:1", APIKey: "k"})
	var ie *InsecureHTTPError
	if !errors.As(err, &ie) || ie.Host != "10.0.0.1" || !strings.Contains(err.Error(), "plain http://") {
		t.Fatalf("New = %v, want an InsecureHTTPError for 10.0.0.1", err)
	}
	if _, err := New(Options{BaseURL: "http://10.0.0.1:1", APIKey: "k", AllowInsecureHTTP: true}); err != nil {
		t.Fatalf("New with AllowInsecureHTTP = %v", err)
	}
}

// TestCAFile checks that a client trusts a server's self-signed
// certificate given as CAFile, and not without it.
func TestCAFile(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "application/json")
		w.Write([]byte(`{"id":"memstore_1","type":"memory_store","name":"n"}`))
	}))
	defer ts.Close()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{BaseURL: ts.URL, APIKey: "k", CAFile: caFile, RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetStore(context.Background(), "memstore_1"); err != nil {
		t.Errorf("with the CA file: %v", err)
	}
	c, err = New(Options{BaseURL: ts.URL, APIKey: "k", RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetStore(context.Background(), "memstore_1")
	var ua x509.UnknownAuthorityError
	var ce *CertificateError
	if !errors.As(err, &ua) || !errors.As(err, &ce) || !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "--ca-file") {
		t.Errorf("without the CA file: %v, want an unknown authority error, as a CertificateError and store.ErrUnavailable, naming --ca-file", err)
	}
	t.Logf("without the CA file: %v", err)

	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{notPEM, filepath.Join(dir, "missing.pem")} {
		if _, err := NewTransport(f); err == nil {
			t.Errorf("NewTransport(%s) accepted it", f)
		}
		if _, err := New(Options{BaseURL: ts.URL, APIKey: "k", CAFile: f}); err == nil {
			t.Errorf("New with CAFile %s accepted it", f)
		}
	}
	if _, err := New(Options{BaseURL: ts.URL, APIKey: "k", CAFile: caFile, HTTPClient: ts.Client()}); err == nil {
		t.Error("New accepted both CAFile and HTTPClient")
	}
}
