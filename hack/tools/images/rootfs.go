package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The user the servers run as, distroless's "nonroot": the manifests set
// runAsNonRoot, which the kubelet can only check for a numeric user.
const (
	nonrootUID = 65532
	nonrootGID = 65532
)

// caBundlePath is where Go's crypto/x509 (and distroless/static) looks first
// for the system's roots on Linux.
const caBundlePath = "etc/ssl/certs/ca-certificates.crt"

// entry is one file or directory of a layer.
type entry struct {
	path     string // without a leading slash, as image layers name them
	mode     int64  // permission bits (and the sticky bit)
	uid, gid int
	dir      bool
	body     []byte
}

// baseFiles is what a static Go binary needs of gcr.io/distroless/static:nonroot,
// written here because no base image can be pulled where the images are
// built: the users and groups (so the nonroot user has a name and a home),
// a world-writable /tmp, and the Mozilla (NSS) root certificates for any TLS
// peer outside the cluster. The servers talk only to the in-cluster API server
// (its CA comes with the service account token), so the roots are there for
// parity with distroless, not for the servers' own connections.
func baseFiles() ([]entry, error) {
	certs, err := caBundle()
	if err != nil {
		return nil, err
	}
	return []entry{
		{path: "etc", mode: 0o755, dir: true},
		{path: "etc/passwd", mode: 0o644, body: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonrootUID, nonrootGID))},
		{path: "etc/group", mode: 0o644, body: []byte(
			"root:x:0:\n" +
				"nobody:x:65534:\n" +
				fmt.Sprintf("nonroot:x:%d:\n", nonrootGID))},
		// Go's resolver reads it to decide between /etc/hosts and DNS.
		{path: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{path: "etc/ssl", mode: 0o755, dir: true},
		{path: "etc/ssl/certs", mode: 0o755, dir: true},
		{path: caBundlePath, mode: 0o644, body: certs},
		{path: "home", mode: 0o755, dir: true},
		{path: "home/nonroot", mode: 0o700, uid: nonrootUID, gid: nonrootGID, dir: true},
		{path: "root", mode: 0o700, dir: true},
		{path: "tmp", mode: 0o1777, dir: true},
	}, nil
}

// caBundle writes the NSS roots that golang.org/x/crypto/x509roots/fallback
// carries (its version in go.mod pins the set) as one PEM file. Roots with a
// constraint (a distrust-after date) are left out: a PEM file cannot carry the
// constraint, and trusting them without it would trust more than NSS does.
func caBundle() ([]byte, error) {
	var buf bytes.Buffer
	n := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("x509roots/fallback holds no unconstrained roots")
	}
	return buf.Bytes(), nil
}

// tarEntries writes the entries as an uncompressed tar stream with fixed
// timestamps, so the same inputs give the same layer digest.
func tarEntries(entries []entry, modTime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.path,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: modTime,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
