// A Go standard-library reverse proxy: the floor a compiled, garbage-collected proxy sets for Sigil's
// benchmarks (bench/peers.ts). With -sign, it also does what a receipt costs at its least: the SHA-256 of
// the response bytes and one ECDSA P-256 signature per response (a header for JSON, a trailing SSE comment
// for a stream). Standard library only; `go build` needs no module download.
package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"flag"
	"hash"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
)

// signingBody hashes a stream as it passes and, at its end, appends the signature over the hash as an SSE comment.
type signingBody struct {
	body   io.ReadCloser
	digest hash.Hash
	key    *ecdsa.PrivateKey
	tail   *bytes.Reader
}

func (b *signingBody) Read(p []byte) (int, error) {
	if b.tail != nil {
		return b.tail.Read(p)
	}
	n, err := b.body.Read(p)
	b.digest.Write(p[:n])
	if err == io.EOF {
		sig, serr := ecdsa.SignASN1(rand.Reader, b.key, b.digest.Sum(nil))
		if serr != nil {
			return n, serr
		}
		b.tail = bytes.NewReader([]byte(": receipt " + base64.RawURLEncoding.EncodeToString(sig) + "\n\n"))
		if n > 0 {
			return n, nil
		}
		return b.tail.Read(p)
	}
	return n, err
}

func (b *signingBody) Close() error { return b.body.Close() }

func main() {
	port := flag.Int("port", 0, "port to listen on (127.0.0.1)")
	upstream := flag.String("upstream", "", "the engine's base URL")
	sign := flag.Bool("sign", false, "sign the SHA-256 of every response with ECDSA P-256")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil || *upstream == "" || *port == 0 {
		log.Fatal("usage: go-proxy -port N -upstream http://127.0.0.1:M [-sign]")
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // flush every write: SSE events leave as they arrive
	proxy.Transport = &http.Transport{MaxIdleConnsPerHost: 2048, MaxConnsPerHost: 0}
	if *sign {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			log.Fatal(err)
		}
		proxy.ModifyResponse = func(res *http.Response) error {
			if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
				res.Body = &signingBody{body: res.Body, digest: sha256.New(), key: key}
				return nil
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				return err
			}
			digest := sha256.Sum256(body)
			sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
			if err != nil {
				return err
			}
			res.Header.Set("X-Receipt", base64.RawURLEncoding.EncodeToString(sig))
			res.Header.Set("Content-Length", strconv.Itoa(len(body)))
			res.ContentLength = int64(len(body))
			res.Body = io.NopCloser(bytes.NewReader(body))
			return nil
		}
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:"+strconv.Itoa(*port), proxy))
}
