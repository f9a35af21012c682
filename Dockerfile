# Sigil: attested reverse proxy. Multi-stage: dependencies are installed in a first stage and the
# runtime image holds only production modules and sources, running as a non-root user.
FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# npm install honours the lock file; npm ci would refuse it (optional platform packages absent from the registry).
RUN npm install --omit=dev --omit=optional --no-audit --no-fund

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
RUN groupadd --system sigil && useradd --system --gid sigil --home-dir /app --shell /usr/sbin/nologin sigil
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY src ./src
COPY config ./config
RUN mkdir -p /app/.sigil && chown sigil:sigil /app/.sigil
USER sigil
EXPOSE 8080
ENTRYPOINT ["node", "bin/sigil.js"]
CMD ["serve", "--config", "config/sigil.yaml"]
