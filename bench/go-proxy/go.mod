module sigil.bench/go-proxy

go 1.19
