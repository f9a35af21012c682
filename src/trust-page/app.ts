import { sendChat, type ChatMessage } from './chat.ts';
import type { ChatApi } from './chat-api.ts';
import { explain } from './explain.ts';
import type { ReceiptContext } from '../verify/exchange.ts';
import type { ServiceFacts } from '../verify/verify-service.ts';
import { HEADLINE_WORDS } from '../verify/headline.ts';
import { DEVELOPMENT_WAIVER, unreadableReport, verifyService, type RimFile, type ServiceReport } from './verify-service.ts';
import { parseReferenceValues, type ReferenceValues } from '../verify/reference/reference-values.ts';
import { checkMark, fail, isNotPinned, isWaived, verdictOf, type Check, type CheckMark } from '../verify/check.ts';
import { InvariantError } from '../protocol/invariant-error.ts';

/** The trust page in the browser: static markup, every result computed here. The API key lives in memory only. */

const byId = <T extends HTMLElement>(id: string): T => {
  const element = document.getElementById(id);
  if (element === null) throw new InvariantError(`the page has no #${id}`);
  return element as T;
};

function element<K extends keyof HTMLElementTagNameMap>(tag: K, text?: string, className?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (className !== undefined) e.className = className;
  return e;
}

/** The words `sigil verify` prints before each check, and the tone the page gives them. */
const STATUS: Record<CheckMark, { word: string; tone: 'pass' | 'fail' | 'note' }> = {
  PASS: { word: 'PASS', tone: 'pass' },
  FAIL: { word: 'FAIL', tone: 'fail' },
  '----': { word: 'NOT PINNED', tone: 'note' },
  WAIVED: { word: 'WAIVED', tone: 'note' },
};

const VERDICTS = HEADLINE_WORDS;

let report: ServiceReport | undefined;
/** The service the verdict on screen is about: the chat talks to this base URL only, never to the field's current text. */
let verifiedBase: string | undefined;
/** Bumped whenever the verdict is cleared: a check still running when the user changes the target is thrown away. */
let generation = 0;
const history: ChatMessage[] = [];

/** The reference values file of docs/auditing.md, read by the verifier's own reader: an unknown key or a bad value is named. */
function readReference(text: string): ReferenceValues | undefined {
  if (text.trim() === '') return undefined;
  return parseReferenceValues(text);
}

/**
 * The checks, each with its status and detail; with `shareTitles` (a receipt's checks, which the registry
 * explains in one title and sentence), a title and sentence that repeat the row above are shown once.
 */
function renderChecks(list: HTMLOListElement, checks: readonly Check[], shareTitles = false): void {
  let previous = '';
  list.replaceChildren(
    ...checks.map((check) => {
      const item = element('li');
      const { title, why } = explain(check.name);
      const status = STATUS[checkMark(check)];
      const repeated = shareTitles && `${title}\n${why}` === previous;
      previous = `${title}\n${why}`;
      item.append(element('span', status.word, `status ${status.tone}`));
      if (!repeated) item.append(element('span', title, 'check-title'));
      if (!repeated && why !== '') item.append(element('p', why, 'check-why'));
      const detail = `${isNotPinned(check) ? 'NOT PINNED: ' : ''}${check.detail}${isWaived(check) ? ` (waived: ${check.waived})` : ''}`;
      item.append(element('p', `${check.name}: ${detail}`, 'check-detail'));
      return item;
    }),
  );
}

function renderFacts(r: ServiceReport): void {
  const facts = byId<HTMLDListElement>('facts');
  const doc = r.document;
  const rows: Array<[string, string]> =
    doc === undefined
      ? []
      : [
          ['TEE', doc.tee === 'none' ? 'none (development only)' : doc.tee],
          [doc.tee === 'tdx' ? 'MRTD' : 'Launch measurement', doc.measurement],
          ['Report data', doc.report_data],
          ['Policy hash', doc.binding.policy_hash],
          ['Receipt keys', doc.binding.jwks.keys.map((k) => String(k.kid ?? '?')).join(', ')],
          ['TLS key (SHA-256 of SPKI)', doc.binding.tls_spki_sha256 ?? 'none: TLS ends outside the enclave'],
          ['Encrypted bodies (HPKE key)', doc.binding.hpke_key_config === null ? 'off' : `${doc.binding.hpke_key_config.slice(0, 24)}…`],
          ['GPU reports', String(doc.gpu_evidence.length)],
          [
            'Event log',
            doc.event_log === null
              ? 'none'
              : `${doc.event_log.runtime_events.length} runtime event(s); Sigil measured itself: ${doc.event_log.self_measurement.extended ? 'yes' : `no (${doc.event_log.self_measurement.reason ?? 'unknown'})`}`,
          ],
        ];
  facts.replaceChildren(...rows.flatMap(([k, v]) => [element('dt', k), element('dd', v)]));
}

function renderModels(r: ServiceReport): void {
  const body = byId<HTMLTableElement>('models').tBodies[0]!;
  body.replaceChildren(
    ...r.models.map((m) => {
      const row = element('tr');
      const price = m.pricing === undefined ? '' : `${m.pricing.input_per_mtok} / ${m.pricing.output_per_mtok} ${m.pricing.currency}`;
      for (const cell of [
        m.id,
        m.provider ?? '',
        m.context_window?.toLocaleString('en') ?? '',
        m.reasoning ? 'yes' : 'no',
        price,
        (m.regions ?? []).join(', '),
        (m.endpoints ?? []).join(', '),
      ]) {
        row.append(element('td', cell));
      }
      return row;
    }),
  );
  renderChatModels(r);
}

/** The API the user chose for the chat. */
function chosenApi(): ChatApi {
  return byId<HTMLSelectElement>('chat-api').value === 'messages' ? 'messages' : 'chat';
}

/** The models that serve the chosen API (a catalogue entry's `endpoints` names it), the only ones the chat offers. */
function renderChatModels(r: ServiceReport): void {
  const apis = byId<HTMLSelectElement>('chat-api');
  const messages = apis.querySelector<HTMLOptionElement>('option[value="messages"]')!;
  // A service none of whose models serves the Messages API offers only chat.
  messages.disabled = !r.models.some((m) => m.endpoints?.includes('messages') === true);
  if (messages.disabled) apis.value = 'chat';
  const api = chosenApi();
  const select = byId<HTMLSelectElement>('chat-model');
  const served = r.models.filter((m) => (m.endpoints === undefined ? api === 'chat' : m.endpoints.includes(api)));
  select.replaceChildren(...served.map((m) => Object.assign(element('option', m.id), { value: m.id })));
}

/** What the receipt says about where the answer came from: its signed endpoint, only when the receipt verified. */
function endpointLine(verified: boolean, endpoint: string | undefined, path: string): string {
  if (!verified) return 'The receipt did not verify: nothing vouches for which endpoint answered.';
  return endpoint === undefined
    ? `This answer came from ${path}: the receipt predates the endpoint claim, and then only OpenAI's endpoints were served.`
    : `This answer came from ${endpoint}: the endpoint the signed receipt names.`;
}

function show(id: string): void {
  byId(id).hidden = false;
}

function render(r: ServiceReport): void {
  const verdict = VERDICTS[r.headline];
  const line = byId('verdict');
  line.textContent = verdict.text;
  line.className = `verdict ${verdict.tone}`;
  byId('verdict-detail').textContent = `${verdict.detail} ${r.verdict.summary}.`;
  renderChecks(byId<HTMLOListElement>('checks'), r.checks);
  renderFacts(r);
  renderModels(r);
  for (const id of ['verdict-panel', 'checks-panel', 'facts-panel', 'models-panel']) show(id);
  if (r.document !== undefined && r.headline !== 'failed') {
    byId('chat-note').textContent =
      r.facts?.hpkeKeyConfig != null
        ? 'Messages are encrypted in this page to the attested key; a load balancer in front of the service sees only ciphertext.'
        : 'This service offers no attested encryption key: messages are not encrypted end to end (only by TLS, if this page came over TLS).';
    show('chat-panel');
  }
}

/** The origin of `base`, or undefined when it is no http(s) URL. */
function originOf(base: string): string | undefined {
  try {
    const url = new URL(base);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : undefined;
  } catch {
    return undefined;
  }
}

/** The origin that served this page, when it came over HTTP(S); a page opened from a file has none. */
function ownOrigin(): string | undefined {
  return location.protocol === 'http:' || location.protocol === 'https:' ? location.origin : undefined;
}

/** A service other than the one that served this page: it is checked, and sent a key, only on the user's explicit choice. */
function isOtherService(base: string): boolean {
  const own = ownOrigin();
  return own === undefined || originOf(base) !== own;
}

/** Forgets the verdict on screen and hides the chat: nothing may be sent until a service is verified again. */
function clearVerdict(): void {
  generation += 1;
  report = undefined;
  verifiedBase = undefined;
  history.length = 0;
  for (const id of ['verdict-panel', 'checks-panel', 'facts-panel', 'models-panel', 'chat-panel', 'receipts-panel']) byId(id).hidden = true;
  byId('verdict').textContent = '';
  byId('chat-log').replaceChildren();
  byId('receipts').replaceChildren();
}

/** Says whether the field names another service than this page's, and asks for the user's explicit choice if so. */
function showTarget(): void {
  const base = byId<HTMLInputElement>('service-url').value.trim();
  const other = base !== '' && isOtherService(base);
  const notice = byId('other-service');
  notice.hidden = !other;
  if (other) {
    const own = ownOrigin();
    byId('other-service-text').textContent =
      own === undefined
        ? `This page was opened from a file. It will check ${originOf(base) ?? base} only if you choose to; your API key goes only to a service it has verified.`
        : `${originOf(base) ?? base} is another service than ${own}, which served this page. It is checked, and your API key sent to it, only if you choose so below.`;
  } else {
    byId<HTMLInputElement>('allow-other-service').checked = false;
  }
}

async function verify(event?: SubmitEvent): Promise<void> {
  event?.preventDefault();
  const button = byId<HTMLButtonElement>('verify-button');
  const base = byId<HTMLInputElement>('service-url').value.trim();
  clearVerdict();
  if (isOtherService(base) && !byId<HTMLInputElement>('allow-other-service').checked) {
    showTarget();
    byId('other-service-text').textContent += ' Tick the box to check it.';
    byId<HTMLInputElement>('allow-other-service').focus();
    return;
  }
  const mine = generation;
  button.disabled = true;
  try {
    let reference: ReferenceValues | undefined;
    try {
      reference = readReference(byId<HTMLTextAreaElement>('reference').value);
    } catch (err) {
      if (mine !== generation) return;
      report = unreadableReport(fail('reference.file', (err as Error).message));
      render(report);
      return;
    }
    const rims: RimFile[] = await Promise.all(
      Array.from(byId<HTMLInputElement>('rim-files').files ?? [], async (file) => ({ name: file.name, text: await file.text() })),
    );
    const result = await verifyService(base, { ...(reference === undefined ? {} : { reference }), ...(rims.length === 0 ? {} : { rims }) });
    // The target changed (or was checked again) meanwhile: this verdict is about a URL no longer on screen.
    if (mine !== generation) return;
    report = result;
    verifiedBase = base;
    render(report);
  } finally {
    button.disabled = false;
  }
}

/** What the verified service vouches for, as its receipts are held to it; a development service's receipts are only tried, their tee waived. */
function receiptContext(facts: ServiceFacts): ReceiptContext {
  const context: ReceiptContext = { jwks: facts.jwks, measurement: facts.measurement, policy: facts.policy, policyHash: facts.policyHash };
  if (facts.attestationHash !== undefined) context.attestationHash = facts.attestationHash;
  if (facts.tee === 'none') context.noHardwareEnclave = DEVELOPMENT_WAIVER;
  return context;
}

function addMessage(role: 'user' | 'assistant', text: string): HTMLElement {
  const box = element('div', undefined, `message ${role}`);
  box.append(element('span', role === 'user' ? 'You' : 'Model', 'who'));
  const content = element('span', text, 'content');
  box.append(content);
  byId('chat-log').append(box);
  return content;
}

async function chat(event: SubmitEvent): Promise<void> {
  event.preventDefault();
  const base = verifiedBase;
  const facts = report?.facts;
  if (base === undefined || report?.document === undefined || facts === undefined) return;
  if (isOtherService(base) && !byId<HTMLInputElement>('allow-other-service').checked) return;
  const button = byId<HTMLButtonElement>('chat-send');
  const input = byId<HTMLTextAreaElement>('chat-message');
  const text = input.value;
  button.disabled = true;
  history.push({ role: 'user', content: text });
  addMessage('user', text);
  const answer = addMessage('assistant', '');
  try {
    const outcome = await sendChat({
      api: chosenApi(),
      base,
      apiKey: byId<HTMLInputElement>('api-key').value,
      model: byId<HTMLSelectElement>('chat-model').value,
      messages: history,
      ...(facts.hpkeKeyConfig === null ? {} : { hpkeKeyConfig: facts.hpkeKeyConfig }),
      receipts: receiptContext(facts),
      onText: (piece) => (answer.textContent += piece),
    });
    history.push({ role: 'assistant', content: outcome.reply });
    input.value = '';
    const verdict = verdictOf(outcome.receipt.checks);
    const verified = verdict.outcome === 'verified' || verdict.outcome === 'verified-with-waivers';
    const item = element('li');
    item.append(
      element(
        'strong',
        verdict.outcome === 'verified'
          ? 'Receipt verified'
          : verdict.outcome === 'verified-with-waivers'
            ? 'Receipt verified with waivers'
            : 'Receipt NOT verified',
      ),
    );
    item.append(` ${new Date().toLocaleTimeString('en')} · ${outcome.encrypted ? 'encrypted (EHBP)' : 'not encrypted'} · id ${outcome.receiptId ?? '?'}`);
    item.append(element('p', endpointLine(verified, outcome.receipt.claims?.endpoint, outcome.path), 'receipt-endpoint'));
    const checks = element('ol', undefined, 'checks');
    renderChecks(checks, outcome.receipt.checks, true);
    item.append(checks);
    byId('receipts').prepend(item);
    show('receipts-panel');
  } catch (err) {
    answer.textContent = `The request failed: ${(err as Error).message}`;
    history.pop();
  } finally {
    button.disabled = false;
  }
}

function start(): void {
  const url = byId<HTMLInputElement>('service-url');
  const fromQuery = new URLSearchParams(location.search).get('url');
  if (fromQuery !== null) url.value = fromQuery;
  else if (location.protocol === 'http:' || location.protocol === 'https:') url.value = location.origin;
  byId<HTMLInputElement>('reference-file').addEventListener('change', async (event) => {
    const file = (event.target as HTMLInputElement).files?.[0];
    if (file !== undefined) byId<HTMLTextAreaElement>('reference').value = await file.text();
  });
  url.addEventListener('input', () => {
    clearVerdict();
    showTarget();
  });
  byId<HTMLInputElement>('allow-other-service').addEventListener('change', (event) => {
    if (!(event.target as HTMLInputElement).checked) clearVerdict();
  });
  byId<HTMLFormElement>('target-form').addEventListener('submit', (e) => void verify(e));
  byId<HTMLFormElement>('chat-form').addEventListener('submit', (e) => void chat(e));
  byId<HTMLSelectElement>('chat-api').addEventListener('change', () => {
    if (report !== undefined) renderChatModels(report);
  });
  showTarget();
  // The page's own service is checked at once; another one waits for the user's explicit choice.
  if (url.value.trim() !== '' && !isOtherService(url.value.trim())) void verify();
}

start();
