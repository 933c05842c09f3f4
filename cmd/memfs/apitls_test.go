package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memfs/memfs/store/client"
)

// TestAPITLSFlags: a flag wins over its environment variable, an
// --insecure-http=false given wins over MEMFS_INSECURE_HTTP=true, and a
// bad MEMFS_INSECURE_HTTP or CA file is a usage error.
func TestAPITLSFlags(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("no certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args     []string
		env      map[string]string
		insecure bool
		err      string // "" no error
	}{
		{args: nil, insecure: false},
		{args: []string{"--insecure-http"}, insecure: true},
		{env: map[string]string{envInsecureHTTP: "true"}, insecure: true},
		{env: map[string]string{envInsecureHTTP: "0"}, insecure: false},
		{args: []string{"--insecure-http=false"}, env: map[string]string{envInsecureHTTP: "true"}, insecure: false},
		{env: map[string]string{envInsecureHTTP: "yes please"}, err: envInsecureHTTP + " must be true or false"},
		{args: []string{"--ca-file", notPEM}, err: "holds no PEM certificate"},
		{env: map[string]string{envCAFile: filepath.Join(dir, "missing.pem")}, err: "--ca-file"},
	} {
		var f apiTLSFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.add(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		got, err := f.resolve(func(k string) string { return tc.env[k] })
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, new(usageError)) {
				t.Errorf("%v %v: %v, want a usage error saying %q", tc.args, tc.env, err, tc.err)
			}
		case err != nil:
			t.Errorf("%v %v: %v", tc.args, tc.env, err)
		case got.insecureHTTP != tc.insecure:
			t.Errorf("%v %v: insecure %v, want %v", tc.args, tc.env, got.insecureHTTP, tc.insecure)
		}
	}
}

// TestClientUsage: a refused plain http:// URL becomes a usage error that
// says what to do; another client error, a plain usage error.
func TestClientUsage(t *testing.T) {
	_, err := client.New(client.Options{BaseURL: "http://memfs.example:8080", APIKey: "k"})
	err = clientUsage(err)
	if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), insecureHTTPFix) || strings.Contains(err.Error(), "client: ") {
		t.Errorf("clientUsage(refused) = %v", err)
	}
	_, err = client.New(client.Options{BaseURL: "ftp://x", APIKey: "k"})
	err = clientUsage(err)
	if !errors.As(err, new(usageError)) || strings.Contains(err.Error(), insecureHTTPFix) {
		t.Errorf("clientUsage(bad scheme) = %v", err)
	}
}
