import { EngineRequestFailure } from '../proxy/engine-unreachable.ts';
import { randomBytes } from 'node:crypto';
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { Duplex } from 'node:stream';
import type { AppContext } from './context.ts';
import { HttpError, httpError, toHttpError } from '../protocol/errors.ts';
import { sendAnthropicError, sendError } from './respond.ts';
import { clientRequestId, unmatchedPathShape, type AccessLogLine } from './access-log.ts';
import { parseRequestTarget, type RequestTarget } from './request-target.ts';
import { createExchangeHandler } from './routes/exchange.ts';
import type { Budget } from '../limits/memory-budget.ts';
import type { InFlightRequests } from './in-flight.ts';
import { RELAYED_ENDPOINTS } from './endpoints.ts';
import { createReadyHandler, handleHealthz } from './routes/health.ts';
import { handleListModels, handleRetrieveModel } from './routes/models.ts';
import { handleGetReceipt } from './routes/receipts.ts';
import { handleLog } from './routes/transparency-log.ts';
import { createAttestationHandler, handleJwks, handlePolicy } from './routes/verify.ts';
import { createMetricsHandler, metricsToken } from './routes/metrics.ts';
import { createTrustPageHandler, defaultTrustPageDir, TRUST_PAGE_PATHS } from './routes/trust-page.ts';
import { applyCors, createCors } from './pipeline/cors.ts';
import { acceptSealed } from './pipeline/ehbp.ts';
import { refuseDuplicateHeaders } from './pipeline/refuse-duplicate-headers.ts';
import { KEYS_MEDIA_TYPE, KEYS_PATH } from '../ehbp/suite.ts';
import { GATEWAY_PATH } from '../protocol/ohttp.ts';
import { createGatewayHandler, handleGatewayKeys } from './routes/ohttp-gateway.ts';
import { cameThroughGateway } from './oblivious-requests.ts';
import { refuseRenegotiation, secureContextOptions, tlsServerOptions } from '../tls/hardening.ts';
import type { ServedTls } from '../tls/provision.ts';
import { addressRanges } from '../config/address-range.ts';

type Handler = (req: IncomingMessage, res: ServerResponse, ctx: AppContext, url: RequestTarget, log: AccessLogLine) => void | Promise<void>;

interface Route {
  /** The route's name in logs: its template, never the concrete path (ids could be anything). */
  name: string;
  methods: Record<string, Handler>;
  /** The methods it answers, as `Allow` and CORS preflights name them. */
  allow: string;
  /** Public documents any page may read (docs/trust-page.md): served with `Access-Control-Allow-Origin: *`, never with credentials. */
  public?: true;
  /** Anthropic's Messages API (docs/api.md#anthropic-messages): errors in its shape, and its `request-id` header. */
  anthropic?: true;
}

/** Holds the live context; reloads swap it whole between requests. */
export interface AppState {
  ctx: AppContext;
  /** Requests not yet finished, for a graceful shutdown. */
  inFlight: InFlightRequests;
  /** Set on SIGTERM: /readyz answers 503 so load balancers move on, and responses close their connections. */
  draining: boolean;
  /** Request bodies and buffered answers held at once (limits.buffer_budget_bytes). */
  buffers: Budget;
  /** Aborted when the shutdown grace is over: streams still running end with one error event. */
  streamsCut: AbortController;
}

/** A route with its `Allow` list made once, not on every request that needs it. */
function withAllow(route: Omit<Route, 'allow'>): Route {
  return { ...route, allow: Object.keys(route.methods).join(', ') };
}

/** `listener`: this server's own request handler, through which the Oblivious HTTP gateway serves what it opens. */
function buildRoutes(state: AppState, listener: () => (req: IncomingMessage, res: ServerResponse) => Promise<void>) {
  const { limits } = state.ctx.config;
  const attestationAllowances = {
    fresh: { burst: limits.fresh_attestation_burst, perS: limits.fresh_attestations_per_s },
    signed: { burst: limits.signed_nonce_burst, perS: limits.signed_nonces_per_s },
    trustedProxies: state.ctx.config.listen.trusted_proxies.length === 0 ? undefined : addressRanges(state.ctx.config.listen.trusted_proxies),
  };
  const get = (handler: Handler) => ({ GET: handler, HEAD: handler });
  const exact = new Map<string, Route>();
  const add = (path: string, route: Omit<Route, 'allow'>) => exact.set(path, withAllow(route));
  add('/v1/models', { name: '/v1/models', methods: get(handleListModels), public: true });
  add('/v1/verify/jwks.json', { name: '/v1/verify/jwks.json', methods: get(handleJwks), public: true });
  add('/v1/verify/policy', { name: '/v1/verify/policy', methods: get(handlePolicy), public: true });
  add('/v1/verify/attestation', { name: '/v1/verify/attestation', methods: get(createAttestationHandler(attestationAllowances)), public: true });
  add('/healthz', { name: '/healthz', methods: get(handleHealthz) });
  add(KEYS_PATH, { name: KEYS_PATH, methods: get(handleHpkeKeys), public: true });
  const gateway = createGatewayHandler(listener);
  add(GATEWAY_PATH, { name: GATEWAY_PATH, methods: { ...get(handleGatewayKeys), POST: (req, res, ctx) => gateway(req, res, ctx) }, public: true });
  add('/readyz', { name: '/readyz', methods: get(createReadyHandler(state)) });
  for (const endpoint of RELAYED_ENDPOINTS) {
    const handler = createExchangeHandler(endpoint, { buffers: state.buffers, streamsCut: state.streamsCut.signal });
    add(endpoint.path, {
      name: endpoint.path,
      methods: { POST: (req, res, ctx, _url, log) => handler(req, res, ctx, log) },
      ...(endpoint.errors === 'anthropic' ? { anthropic: true } : {}),
    });
  }
  const trustPage = createTrustPageHandler(state.ctx.config.trust_page?.dir ?? defaultTrustPageDir());
  for (const path of TRUST_PAGE_PATHS) add(path, { name: path, methods: get((req, res, _ctx, url) => trustPage(req, res, url.pathname)) });
  const { metrics } = state.ctx.config;
  if (metrics.enabled) {
    add('/metrics', { name: '/metrics', methods: get(createMetricsHandler(metricsToken(metrics, process.env))) });
  }
  const prefixed: Array<[string, Route]> = [
    ['/v1/models/', withAllow({ name: '/v1/models/{id}', methods: get(handleRetrieveModel), public: true })],
    ['/v1/receipts/', withAllow({ name: '/v1/receipts/{id}', methods: get(handleGetReceipt) })],
    ['/v1/log/', withAllow({ name: '/v1/log/{resource}', methods: get(handleLog), public: true })],
  ];
  return (pathname: string): Route | undefined => exact.get(pathname) ?? prefixed.find(([prefix]) => pathname.startsWith(prefix))?.[1];
}

/** GET /.well-known/hpke-keys (docs/ehbp.md#on-the-server): the exact key config bytes the attestation binds; 404 with EHBP off. */
function handleHpkeKeys(req: IncomingMessage, res: ServerResponse, ctx: AppContext): void {
  if (ctx.ehbp === undefined) throw httpError('not_found', 'Encrypted bodies (EHBP) are off on this service.');
  res.writeHead(200, { 'content-type': KEYS_MEDIA_TYPE, 'content-length': ctx.ehbp.keyConfig.length, 'cache-control': 'no-cache' });
  res.end(req.method === 'HEAD' ? undefined : ctx.ehbp.keyConfig);
}

function recordMetrics(ctx: AppContext, log: AccessLogLine, seconds: number): void {
  const { metrics } = ctx;
  metrics.requests.inc({ route: log.route, model: log.model ?? '', status: String(log.status) });
  metrics.duration.observe({ route: log.route }, seconds);
  if (log.ttft_s !== undefined) metrics.timeToFirstToken.observe({ model: log.model ?? '' }, log.ttft_s);
  if (log.error_code?.startsWith('upstream_')) metrics.engineErrors.inc({ code: log.error_code });
  if (log.usage !== undefined) {
    const labels = { model: log.model ?? '', key_id: log.key_id ?? '' };
    metrics.promptTokens.inc(labels, log.usage.prompt_tokens);
    metrics.completionTokens.inc(labels, log.usage.completion_tokens);
  }
}

/** 16 random hex digits per request, cut from a 4 KiB block: one randomBytes call per 512 requests instead of one each. */
let idBlock = Buffer.alloc(0);
let idOffset = 0;
function nextRequestId(): string {
  if (idOffset === idBlock.length) {
    idBlock = randomBytes(4096);
    idOffset = 0;
  }
  idOffset += 8;
  return idBlock.toString('hex', idOffset - 8, idOffset);
}

/** The request handler: route, run, turn any failure into an OpenAI-shaped error, log one line. */
export function createRequestHandler(state: AppState) {
  const route = buildRoutes(state, () => handle);
  const cors = createCors(state.ctx.config.cors.allowed_origins, state.ctx.headers);

  const handle = async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = process.hrtime.bigint();
    const ctx = state.ctx;
    const requestId = clientRequestId(req.headers['x-request-id']) ?? nextRequestId();
    // The proxy forwards this header to the engine: the same id in Sigil's log and the engine's.
    req.headers['x-request-id'] = requestId;
    const endSpan = ctx.tracing?.start(req.headers);
    res.setHeader('x-request-id', requestId);
    // Draining: each answer is the connection's last, so a client's next request goes to a replica that stays.
    if (state.draining) res.setHeader('connection', 'close');
    const log: AccessLogLine = { request_id: requestId, method: req.method ?? '', route: 'unmatched' };
    if (ctx.logger.isLevelEnabled('debug')) ctx.logger.debug({ request_id: requestId, method: req.method }, 'request received');
    state.inFlight.enter();
    res.once('close', () => {
      state.inFlight.leave();
      bytesAfterLastRequest.set(req.socket, req.socket.bytesRead);
      const latencyMs = Number(process.hrtime.bigint() - started) / 1e6;
      if (log.status === undefined) log.status = res.headersSent ? res.statusCode : 499;
      // Building the line (an object rest and a spread) cost ~7 us a request in the c=1 profile: only when it is written.
      if (ctx.logger.isLevelEnabled('info')) {
        const { ttft_s: _ttft, ...line } = log;
        ctx.logger.info({ ...line, latency_ms: Math.round(latencyMs * 1000) / 1000 }, 'request');
      }
      recordMetrics(ctx, log, latencyMs / 1000);
      endSpan?.(log);
    });

    let anthropic = false;
    try {
      refuseDuplicateHeaders(req.rawHeaders, ctx.headers);
      const url = parseRequestTarget(req.url ?? '/');
      const matched = route(url.pathname);
      if (matched?.anthropic === true) {
        anthropic = true;
        res.setHeader('request-id', requestId);
      }
      if (matched === undefined) {
        log.path = unmatchedPathShape(url.pathname);
        throw httpError('not_found', `No route for ${req.method} ${url.pathname}.`);
      }
      log.route = matched.name;
      if (applyCors(req, res, cors, matched.public === true, matched.allow)) {
        log.status = 204;
        return;
      }
      const handler = matched.methods[req.method ?? ''];
      if (handler === undefined) {
        const { allow } = matched;
        throw new HttpError('method_not_allowed', `Method ${req.method} is not allowed on ${matched.name}; use ${allow}.`, { headers: { allow } });
      }
      // Oblivious HTTP is sealed end to end already: its POST and the requests it carries are not EHBP's to open or refuse.
      if (matched.name !== GATEWAY_PATH && !cameThroughGateway(req)) acceptSealed(req, res, ctx.ehbp);
      await handler(req, res, ctx, url, log);
      if (log.status === undefined && res.headersSent) log.status = res.statusCode;
    } catch (err) {
      const error = toHttpError(err);
      if (error.code === 'internal_error')
        ctx.logger.error({ request_id: requestId, err: { message: (err as Error).message, stack: (err as Error).stack } }, 'unhandled error');
      if (res.destroyed || res.writableEnded) return;
      log.status = res.headersSent ? res.statusCode : error.status;
      log.error_code = error.code;
      if (err instanceof EngineRequestFailure) {
        log.upstream = err.upstream;
        if (err.errno !== '') log.upstream_errno = err.errno;
      }
      // A reply sent before the body was read (401, 413, 415, 429...) ends the connection: reading
      // on would let anyone stream an unauthenticated body at us for as long as the timeout allows.
      const extraHeaders = req.complete ? undefined : { connection: 'close' };
      if (anthropic) sendAnthropicError(res, error, requestId, extraHeaders);
      else sendError(res, error, extraHeaders);
    }
  };
  return handle;
}

/** What a connection had read when its last request ended: a header timeout with nothing since is an idle keep-alive, not a slow client. */
const bytesAfterLastRequest = new WeakMap<Duplex, number>();

/** Node's parser error codes, as the reasons a rejection is counted and logged under. */
function rejectionOf(err: NodeJS.ErrnoException): {
  status: number;
  code: 'bad_request' | 'request_timeout' | 'request_header_fields_too_large';
  reason: string;
} {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return { status: 408, code: 'request_timeout', reason: 'header_timeout' };
  if (err.code === 'HPE_HEADER_OVERFLOW') return { status: 431, code: 'request_header_fields_too_large', reason: 'headers_too_large' };
  return { status: 400, code: 'bad_request', reason: (err.code ?? 'malformed').toLowerCase().replace(/^hpe_/, '') };
}

const REJECTION_MESSAGES: Record<string, string> = {
  request_timeout: 'The request headers did not arrive in time.',
  request_header_fields_too_large: 'The request headers are larger than this server accepts.',
  bad_request: 'The request is not valid HTTP/1.1.',
};

/**
 * Errors before a request exists (malformed HTTP, smuggling attempts, header timeouts, headers too
 * large): answered in OpenAI's shape where the socket still takes a reply, then closed; logged with
 * the reason only (never the bytes) and counted.
 */
export function handleClientError(state: AppState) {
  return (err: NodeJS.ErrnoException, socket: Duplex): void => {
    if (err.code === 'ECONNRESET' || err.code === 'EPIPE') {
      socket.destroy();
      return;
    }
    // A TLS 1.2 client asked to renegotiate (refused: src/tls/hardening.ts): the connection is closed, nothing written.
    if (err.code === 'ERR_TLS_RENEGOTIATION_DISABLED') {
      state.ctx.metrics.httpRejections.inc({ reason: 'tls_renegotiation' });
      socket.destroy();
      return;
    }
    // A spare connection (a client's pool, a load balancer's keep-alive) that sent nothing: closed quietly, as nginx and Envoy do.
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' && (socket as Duplex & { bytesRead?: number }).bytesRead === (bytesAfterLastRequest.get(socket) ?? 0)) {
      state.ctx.metrics.httpRejections.inc({ reason: 'idle_connection' });
      if (state.ctx.logger.isLevelEnabled('debug')) state.ctx.logger.debug({ reason: 'idle_connection' }, 'idle connection closed');
      socket.destroy();
      return;
    }
    const { status, code, reason } = rejectionOf(err);
    state.ctx.metrics.httpRejections.inc({ reason });
    state.ctx.logger.warn({ status, reason }, 'http rejection');
    // As Node's own default: no reply on a socket that is gone or in the middle of another response.
    const current = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (!socket.writable || current?.headersSent === true) {
      socket.destroy();
      return;
    }
    const body = JSON.stringify({ error: { message: REJECTION_MESSAGES[code], type: 'invalid_request_error', param: null, code } });
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  };
}

/**
 * Plain HTTP, or HTTPS ending here in the enclave (docs/tls.md). A TLS handshake gets the same time as the
 * request headers: a client that stalls mid-handshake is dropped like one that stalls mid-headers.
 */
export function createHttpServer(state: AppState, tls?: ServedTls): Server {
  const { limits } = state.ctx.config;
  const options: ServerOptions = {
    requestTimeout: limits.body_timeout_ms + limits.headers_timeout_ms,
    headersTimeout: limits.headers_timeout_ms,
    // Node checks those timeouts on a sweep, every 30 s by default: often enough to keep them near their values.
    connectionsCheckingInterval: Math.min(1000, limits.headers_timeout_ms),
    keepAliveTimeout: 65_000,
  };
  const handler = createRequestHandler(state);
  if (tls === undefined) {
    const server = createServer(options, handler);
    server.on('clientError', handleClientError(state));
    return server;
  }
  // HSTS: a browser that reached the service over TLS once does not fall back to plaintext for a year.
  const server = createTlsServer({ ...options, ...tlsServerOptions(tls.current, limits.headers_timeout_ms) }, (req, res) => {
    res.setHeader('strict-transport-security', 'max-age=31536000');
    return handler(req, res);
  });
  server.on('clientError', handleClientError(state));
  server.on('secureConnection', refuseRenegotiation);
  // Scanners and half handshakes are routine on a public port: counted, logged at debug only.
  server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    state.ctx.metrics.httpRejections.inc({ reason: 'tls_handshake' });
    if (state.ctx.logger.isLevelEnabled('debug')) state.ctx.logger.debug({ reason: err.code ?? 'tls_handshake' }, 'tls handshake failed');
    socket.destroy();
  });
  tls.onRenewed((credentials) => server.setSecureContext(secureContextOptions(credentials)));
  return server;
}
