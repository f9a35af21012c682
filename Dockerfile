# Sigil: attested reverse proxy. The image holds the measured artifact only (docs/attestation.md, "What is
# measured: one artifact"): bin/sigil.js, dist/sigil/ (Sigil and its JavaScript dependencies, one bundle) and
# dist/addons/koffi.node, plus the trust page, package.json and the example config. No node_modules, no
# TypeScript, no node-llama-cpp (it fronts an engine such as vLLM).

# The base is Node 24 LTS pinned by digest: node:24-bookworm-slim (Node 24.18.0), the multi-arch index digest.
# Refresh it with `docker buildx imagetools inspect node:24-bookworm-slim` (docs/operations.md).
ARG NODE_IMAGE=node:24-bookworm-slim@sha256:6f7b03f7c2c8e2e784dcf9295400527b9b1270fd37b7e9a7285cf83b6951452d

# 1. Build: every dependency (TypeScript, esbuild, and node-llama-cpp for its types), then dist/.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# The workspaces the lock file names: the client package, the built-in engine (@sigil/engine, linked by the install,
# bundled by the build) and the empty stand-ins that keep node-llama-cpp's GPU builds out (packaging/no-gpu-builds).
COPY packages/client/package.json ./packages/client/
COPY packages/engine/package.json ./packages/engine/
COPY packaging ./packaging
# npm install honours the lock file; npm ci would refuse it (optional platform packages absent from the registry).
# No install scripts: this stage only compiles and bundles, and node-llama-cpp is here for its types.
RUN npm install --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY packages/engine ./packages/engine
COPY bin ./bin
RUN npm run build

# 2. Runtime: the artifact, owned by root and read-only to the sigil user that runs it.
FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
RUN groupadd --system sigil && useradd --system --gid sigil --home-dir /app --shell /usr/sbin/nologin sigil
COPY --from=build /src/bin/sigil.js ./bin/sigil.js
COPY --from=build /src/dist/sigil ./dist/sigil
COPY --from=build /src/dist/addons ./dist/addons
COPY --from=build /src/dist/trust-page ./dist/trust-page
COPY package.json ./
COPY config ./config
RUN mkdir -p /app/.sigil && chown sigil:sigil /app/.sigil
USER sigil
EXPOSE 8080
# Liveness: /healthz over the scheme and port of the config served (the example's self-signed TLS on 8080 by default;
# SIGIL_HEALTH_URL for another); the certificate is not checked, only that this Sigil answers.
ENV SIGIL_HEALTH_URL=https://127.0.0.1:8080/healthz
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "const u=new URL(process.env.SIGIL_HEALTH_URL);require(u.protocol.slice(0,-1)).get(u,{rejectUnauthorized:false},(r)=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1))"]
ENTRYPOINT ["node", "--disable-sigusr1", "bin/sigil.js"]
CMD ["serve", "--config", "config/sigil.example.yaml"]
