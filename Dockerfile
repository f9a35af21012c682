# Sigil: attested reverse proxy. The image holds the compiled JavaScript and the proxy's production
# modules only: no TypeScript, no tsx or esbuild, no node-llama-cpp (it fronts an engine such as vLLM).

# 1. Build: every dependency (TypeScript, and node-llama-cpp for its types), then dist/.
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# npm install honours the lock file; npm ci would refuse it (optional platform packages absent from the registry).
# No install scripts: this stage only compiles, and node-llama-cpp is here for its types.
RUN npm install --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build

# 2. Production modules: `dependencies` only; node-llama-cpp is optional and left out.
FROM node:24-bookworm-slim AS modules
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --omit=optional --no-audit --no-fund

# 3. Runtime: dist/, bin/, the example config and production modules, as a non-root user.
FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
RUN groupadd --system sigil && useradd --system --gid sigil --home-dir /app --shell /usr/sbin/nologin sigil
COPY --from=modules /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY config ./config
RUN mkdir -p /app/.sigil && chown sigil:sigil /app/.sigil
USER sigil
EXPOSE 8080
# Liveness: /healthz over the scheme and port of the config served (the example's self-signed TLS on 8080 by default;
# SIGIL_HEALTH_URL for another); the certificate is not checked, only that this Sigil answers.
ENV SIGIL_HEALTH_URL=https://127.0.0.1:8080/healthz
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "const u=new URL(process.env.SIGIL_HEALTH_URL);require(u.protocol.slice(0,-1)).get(u,{rejectUnauthorized:false},(r)=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1))"]
ENTRYPOINT ["node", "bin/sigil.js"]
CMD ["serve", "--config", "config/sigil.example.yaml"]
