import { createServer, type Server } from 'node:http';
import { Agent } from 'node:https';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import acme from 'acme-client';
import { Pool } from 'undici';
import type { Logger } from '../logger/logger.ts';
import { TlsError, tlsCredentials, type TlsCredentials } from './credentials.ts';

export interface AcmeSettings {
  directory_url: string;
  email?: string | undefined;
  ca_file?: string | undefined;
  http_host: string;
  http_port: number;
  renew_before_s: number;
  check_interval_s: number;
}

const CHALLENGE_PREFIX = '/.well-known/acme-challenge/';

/**
 * Answers RFC 8555 http-01 challenges in plain HTTP: only `/.well-known/acme-challenge/{token}` for a
 * token of an order in progress; everything else is 404, so this listener serves no API.
 */
async function listenForChallenges(settings: AcmeSettings, answers: Map<string, string>): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0]!;
    const answer = req.method === 'GET' && path.startsWith(CHALLENGE_PREFIX) ? answers.get(path.slice(CHALLENGE_PREFIX.length)) : undefined;
    if (answer === undefined) {
      res
        .writeHead(404, { 'content-type': 'application/json', connection: 'close' })
        .end('{"error":{"message":"Not found.","type":"invalid_request_error","param":null,"code":"not_found"}}');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(answer);
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 15_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(new TlsError(`tls.acme: cannot listen for http-01 challenges on ${settings.http_host}:${settings.http_port} (${err.code ?? err.message})`)),
    );
    server.listen(settings.http_port, settings.http_host, () => resolve());
  });
  return server;
}

export interface AcmeCertificates {
  /** The certificate in force; replaced on renewal, for the same key. */
  readonly current: TlsCredentials;
  /** The port the http-01 listener is bound to (useful when configured as 0). */
  readonly challengePort: number;
  /** Called with every renewed certificate. */
  onRenewed(listener: (credentials: TlsCredentials) => void): void;
  close(): Promise<void>;
}

/**
 * `tls.mode: acme`: one P-256 key made in this process for its whole life, and a certificate for it from
 * an RFC 8555 server (acme-client), renewed before expiry for the same key, so the attested SPKI hash
 * stays true. A failed renewal keeps the current certificate and retries with back-off.
 */
export async function obtainAcmeCertificates(settings: AcmeSettings, hostnames: readonly string[], logger: Logger): Promise<AcmeCertificates> {
  let ca: string | undefined;
  if (settings.ca_file !== undefined) {
    try {
      ca = readFileSync(settings.ca_file, 'utf8');
    } catch (err) {
      throw new TlsError(`tls.acme.ca_file: cannot read ${settings.ca_file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
    acme.axios.defaults.httpsAgent = new Agent({ ca });
  }
  // Renewals retry on their own schedule; acme-client's own retries of a refused connection end in a TypeError
  // of its own, so an unreachable server is found by `reachDirectory` and said plainly instead.
  (acme.axios.defaults as unknown as { acmeSettings: { retryMaxAttempts: number } }).acmeSettings.retryMaxAttempts = 0;
  const directory = new Pool(new URL(settings.directory_url).origin, { connect: ca === undefined ? {} : { ca }, connections: 1 });
  const reachDirectory = async () => {
    try {
      const response = await directory.request({ method: 'GET', path: new URL(settings.directory_url).pathname, headersTimeout: 10_000, bodyTimeout: 10_000 });
      await response.body.dump();
      if (response.statusCode !== 200) throw new TlsError(`the ACME directory answered HTTP ${response.statusCode}`);
    } catch (err) {
      if (err instanceof TlsError) throw err;
      const code = (err as NodeJS.ErrnoException).code;
      throw new TlsError(`cannot reach the ACME directory (${code ?? (err as Error).message})`);
    }
  };

  const answers = new Map<string, string>();
  const challengeServer = await listenForChallenges(settings, answers);
  const [accountKey, certificateKey] = await Promise.all([acme.crypto.createPrivateEcdsaKey('P-256'), acme.crypto.createPrivateEcdsaKey('P-256')]);
  const newClient = () => new acme.Client({ directoryUrl: settings.directory_url, accountKey, backoffAttempts: 10, backoffMin: 200, backoffMax: 2000 });
  let client = newClient();
  const [, csr] = await acme.crypto.createCsr({ commonName: hostnames[0]!, altNames: [...hostnames] }, certificateKey);

  const order = async (): Promise<TlsCredentials> => {
    await reachDirectory();
    const chain = await client.auto({
      csr,
      ...(settings.email === undefined ? {} : { email: settings.email }),
      termsOfServiceAgreed: true,
      challengePriority: ['http-01'],
      // acme-client's own pre-check would fetch port 80 of each name; the ACME server's validation is what counts.
      skipChallengeVerification: true,
      challengeCreateFn: async (_authz, challenge, keyAuthorization) => void answers.set(challenge.token, keyAuthorization),
      challengeRemoveFn: async (_authz, challenge) => void answers.delete(challenge.token),
    });
    return tlsCredentials(certificateKey.toString(), chain, new Date(), `the certificate from ${settings.directory_url}`);
  };

  let current: TlsCredentials;
  try {
    current = await order();
  } catch (err) {
    await new Promise((resolve) => challengeServer.close(resolve));
    await directory.close();
    throw new TlsError(`tls.acme: no certificate from ${settings.directory_url} for ${hostnames.join(', ')}: ${(err as Error).message}`);
  }
  logger.info({ serial: current.serial, not_after: current.notAfter.toISOString(), hostnames }, 'tls certificate obtained by acme');

  const listeners: Array<(credentials: TlsCredentials) => void> = [];
  const checkMs = settings.check_interval_s * 1000;
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const schedule = (delayMs: number) => {
    if (closed) return;
    timer = setTimeout(() => void renewIfDue(), delayMs);
    timer.unref();
  };
  const renewIfDue = async () => {
    if (current.notAfter.getTime() - Date.now() > settings.renew_before_s * 1000) return schedule(checkMs);
    try {
      const renewed = await order();
      if (closed) return;
      current = renewed;
      failures = 0;
      logger.info({ serial: current.serial, not_after: current.notAfter.toISOString() }, 'tls certificate renewed');
      for (const listener of listeners) listener(current);
      schedule(checkMs);
    } catch (err) {
      failures++;
      // The next attempt starts a fresh session (directory, nonce, account lookup by key): the server may have moved on.
      client = newClient();
      const retryMs = Math.min(checkMs, Math.min(60_000, checkMs) * 2 ** (failures - 1));
      logger.warn(
        { failures, retry_in_s: retryMs / 1000, error: (err as Error).message, not_after: current.notAfter.toISOString() },
        'tls certificate renewal failed: keeping the current certificate',
      );
      schedule(retryMs);
    }
  };
  schedule(checkMs);

  return {
    get current() {
      return current;
    },
    challengePort: (challengeServer.address() as AddressInfo).port,
    onRenewed: (listener) => void listeners.push(listener),
    close: async () => {
      closed = true;
      clearTimeout(timer);
      await new Promise((resolve) => challengeServer.close(resolve));
      await directory.close();
    },
  };
}
