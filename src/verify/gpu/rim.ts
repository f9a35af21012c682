import { X509Certificate } from 'node:crypto';
import { DOMParser, type Element } from '@xmldom/xmldom';
import { fail, pass, type Check } from '../check.ts';
import { commonName, issuanceProblem, sameCertificate } from '../evidence/certificate-chain.ts';
import { revocationCheck, type OcspBundle } from './ocsp.ts';
import { rimSchemaProblems, SWID_NS } from './rim-schema.ts';
import { describeGpuEvidenceError, GpuEvidenceError } from './errors.ts';
import { rimSignedXml, XMLDSIG_NS } from './rim-signature.ts';
import { readRimInput, vbiosBoard, type VbiosBoard } from './rim-service.ts';

const XML_NS = 'http://www.w3.org/XML/1998/namespace';
/** The namespace of the Hash0, Hash1, ... attributes: each one is a SHA-384 alternative. */
const SHA384_ATTRIBUTE_NS = 'http://www.w3.org/2001/04/xmlenc#sha384';
const VBIOS_VERSION = /^[0-9A-F]{2}(\.[0-9A-F]{2}){4}$/i;

/** One measurement of a RIM: the values the GPU may report at this index (NVIDIA's numbering, from 0). */
export interface RimMeasurement {
  index: number;
  /** Inactive measurements are not compared (NVIDIA marks what the GPU does not measure in this mode). */
  active: boolean;
  /** Lowercase hex, each `size` bytes. */
  alternatives: string[];
  size: number;
}

/** A reference integrity manifest (SWID tag) whose signature and chain verified. */
export interface Rim {
  /** How the report names it: `driver RIM 550.90.07`, `VBIOS RIM 96.00.9F.00.01`. */
  label: string;
  kind: 'driver' | 'vbios';
  /** The Meta colloquialVersion: the driver or VBIOS version it describes. */
  version: string;
  product: string;
  tagId: string;
  measurements: RimMeasurement[];
  /** The common name of the certificate that signed it. */
  signer: string;
  /** The RIM service's id, when the RIM was given as the service's answer (null for bare XML). */
  id: string | null;
  /** For a VBIOS RIM with an id: the board it was made for. */
  board: VbiosBoard | null;
}

export interface RimVerification {
  checks: Check[];
  /** Present only when the RIM's signature and its chain to a trusted RIM root both verified. */
  rim?: Rim;
}

export interface VerifyRimOptions {
  /** The check name prefix, e.g. `gpu.rim[0]`. */
  name: string;
  /** Recorded OCSP responses for the signing chain; absent, its revocation is not pinned. */
  bundle?: OcspBundle;
  /** A signing certificate no recorded response covers is waived, not failed. */
  allowMissing?: boolean;
  /** PEM of the trusted RIM roots (NVIDIA's CoRIM signing root). */
  roots: string[];
  at: Date;
}

function attribute(el: Element, name: string, what: string): string {
  const value = el.getAttribute(name);
  if (value === null || value === '') throw new GpuEvidenceError('ERR_RIM_MALFORMED', `${what} has no ${name}`);
  return value;
}

function parse(xml: string, what: string): Element {
  let root: Element | null = null;
  try {
    const doc = new DOMParser({
      onError: (level, message) => {
        if (level !== 'warning') throw new GpuEvidenceError('ERR_RIM_MALFORMED', `${what} is not well-formed XML: ${message}`);
      },
    }).parseFromString(xml, 'text/xml');
    if (doc.doctype !== null) throw new GpuEvidenceError('ERR_RIM_UNSUPPORTED', `${what} has a DOCTYPE, which a RIM never needs`);
    root = doc.documentElement;
  } catch (err) {
    if (err instanceof GpuEvidenceError) throw err;
    throw new GpuEvidenceError('ERR_RIM_MALFORMED', `${what} is not well-formed XML: ${(err as Error).message}`);
  }
  if (root === null || root.localName !== 'SoftwareIdentity' || root.namespaceURI !== SWID_NS) {
    throw new GpuEvidenceError('ERR_RIM_MALFORMED', `${what} is not a SWID tag (root element ${root?.tagName ?? 'none'})`);
  }
  return root;
}

function refuseXmlAttributes(el: Element): void {
  for (let i = 0; i < el.attributes.length; i++) {
    const attr = el.attributes.item(i)!;
    if (attr.namespaceURI === XML_NS) {
      throw new GpuEvidenceError('ERR_RIM_UNSUPPORTED', `the RIM uses ${attr.name}, which canonical XML 1.0 and 1.1 treat differently`);
    }
  }
  for (const child of Array.from(el.childNodes)) if (child.nodeType === 1) refuseXmlAttributes(child as Element);
}

function readMeasurements(root: Element): Pick<Rim, 'version' | 'product' | 'tagId' | 'measurements'> {
  const meta = root.getElementsByTagNameNS(SWID_NS, 'Meta');
  if (meta.length !== 1) throw new GpuEvidenceError('ERR_RIM_MALFORMED', `the RIM holds ${meta.length} Meta elements, not 1`);
  const version = attribute(meta.item(0)!, 'colloquialVersion', 'the RIM Meta');
  const product = meta.item(0)!.getAttribute('product') ?? '';
  const tagId = attribute(root, 'tagId', 'the RIM');
  const measurements: RimMeasurement[] = [];
  for (const el of Array.from(root.getElementsByTagNameNS(SWID_NS, 'Resource'))) {
    if (el.getAttribute('type') !== 'Measurement') continue;
    const index = Number(attribute(el, 'index', 'a RIM measurement'));
    const what = `RIM measurement ${index}`;
    if (!Number.isInteger(index) || index < 0) throw new GpuEvidenceError('ERR_RIM_MALFORMED', `a RIM measurement has index ${el.getAttribute('index')}`);
    if (measurements.some((m) => m.index === index)) throw new GpuEvidenceError('ERR_RIM_MALFORMED', `${what} appears twice`);
    const activeText = attribute(el, 'active', what);
    if (activeText !== 'True' && activeText !== 'False') throw new GpuEvidenceError('ERR_RIM_MALFORMED', `${what} has active="${activeText}"`);
    const count = Number(attribute(el, 'alternatives', what));
    const size = Number(attribute(el, 'size', what));
    if (!Number.isInteger(count) || count < 1 || !Number.isInteger(size) || size < 1) {
      throw new GpuEvidenceError('ERR_RIM_MALFORMED', `${what} has alternatives="${el.getAttribute('alternatives')}" size="${el.getAttribute('size')}"`);
    }
    const alternatives: string[] = [];
    for (let k = 0; k < count; k++) {
      const hash = el.getAttributeNS(SHA384_ATTRIBUTE_NS, `Hash${k}`);
      if (hash === null || !new RegExp(`^[0-9a-fA-F]{${2 * size}}$`).test(hash)) {
        throw new GpuEvidenceError(
          'ERR_RIM_MALFORMED',
          `${what} announces ${count} alternatives but Hash${k} is ${hash === null ? 'missing' : `not ${size} bytes of hex`}`,
        );
      }
      alternatives.push(hash.toLowerCase());
    }
    measurements.push({ index, active: activeText === 'True', alternatives, size });
  }
  if (measurements.length === 0) throw new GpuEvidenceError('ERR_RIM_MALFORMED', 'the RIM lists no measurement');
  return { version, product, tagId, measurements: measurements.sort((a, b) => a.index - b.index) };
}

function keyInfoCertificates(signature: Element): X509Certificate[] {
  const nodes = Array.from(signature.getElementsByTagNameNS(XMLDSIG_NS, 'X509Certificate'));
  if (nodes.length === 0) throw new GpuEvidenceError('ERR_RIM_MALFORMED', "the RIM's signature carries no X509Certificate");
  return nodes.map((node, i) => {
    try {
      return new X509Certificate(Buffer.from((node.textContent ?? '').replace(/\s+/g, ''), 'base64'));
    } catch (err) {
      throw new GpuEvidenceError('ERR_RIM_MALFORMED', `certificate ${i} of the RIM's KeyInfo is not valid: ${(err as Error).message}`);
    }
  });
}

/**
 * The certificates a RIM's signature carries (signer first, as NVIDIA's KeyInfo lists them), read without verifying
 * anything: what `sigil collateral fetch` asks NVIDIA's OCSP responder about. `verifyRim` judges them later.
 */
export function rimSigningChain(text: string): X509Certificate[] {
  const root = parse(readRimInput(text).xml, 'the RIM');
  const signatures = Array.from(root.getElementsByTagNameNS(XMLDSIG_NS, 'Signature'));
  if (signatures.length !== 1) throw new GpuEvidenceError('ERR_RIM_MALFORMED', `the RIM must hold exactly one Signature (found ${signatures.length})`);
  return keyInfoCertificates(signatures[0]!);
}

/** Why the RIM's certificates (signer first) do not lead to a trusted root at `at`, or null when they do. */
function chainProblem(certs: X509Certificate[], roots: X509Certificate[], at: Date): string | null {
  for (let i = 0; i + 1 < certs.length; i++) {
    const problem = issuanceProblem(certs[i]!, certs[i + 1]!, at);
    if (problem !== null) return problem;
  }
  const last = certs[certs.length - 1]!;
  if (roots.some((root) => sameCertificate(root, last))) return null;
  const issuer = roots.find((root) => issuanceProblem(last, root, at) === null);
  return issuer === undefined ? `the chain ends at ${commonName(last)}, which is not a trusted RIM root and was not issued by one` : null;
}

/**
 * Verifies one RIM as NVIDIA's verifier does: the SWID tag's enveloped XML signature (ECDSA P-384 over the whole
 * document), the signer's chain to a trusted RIM root at `at`; and reads its measurements from the bytes the
 * signature covers, not from the document around it.
 */
export function verifyRim(text: string, options: VerifyRimOptions): RimVerification {
  const { name, at } = options;
  let xml: string;
  let id: string | null;
  try {
    ({ xml, id } = readRimInput(text));
  } catch (err) {
    return { checks: [fail(`${name}.signature`, `the RIM cannot be read: ${describeGpuEvidenceError(err)}`)] };
  }
  let root: Element;
  let certs: X509Certificate[];
  let signedXml: string;
  try {
    root = parse(xml, 'the RIM');
    refuseXmlAttributes(root);
    const signatures = Array.from(root.getElementsByTagNameNS(XMLDSIG_NS, 'Signature'));
    if (signatures.length !== 1 || signatures[0]!.parentNode !== root) {
      throw new GpuEvidenceError('ERR_RIM_MALFORMED', `the RIM must hold exactly one Signature, as a child of its root (found ${signatures.length})`);
    }
    certs = keyInfoCertificates(signatures[0]!);
    const signed = rimSignedXml(certs[0]!.publicKey.export({ type: 'spki', format: 'pem' }) as string);
    signed.loadSignature(signatures[0]! as unknown as Node);
    const refs = signed.getReferences();
    if (refs.length !== 1 || refs[0]!.uri !== '') {
      throw new GpuEvidenceError(
        'ERR_RIM_UNSUPPORTED',
        `the RIM's signature must cover the whole document (one Reference with URI ""), not ${refs.map((r) => `"${r.uri}"`).join(', ')}`,
      );
    }
    let valid = false;
    try {
      valid = signed.checkSignature(xml);
    } catch (err) {
      return {
        checks: [
          fail(
            `${name}.signature`,
            `the RIM's XML signature does not verify with its signer's key (${commonName(certs[0]!)}): ${(err as Error).message.slice(0, 160)}`,
          ),
          fail(`${name}.chain`, 'not checked: the signature failed'),
        ],
      };
    }
    if (!valid) {
      const changed = signed.getReferences().some((r) => r.validationError !== undefined);
      const why = changed
        ? 'the document was changed after it was signed (its SHA-384 digest differs from the signed one)'
        : `the XML signature does not verify with its signer's key (${commonName(certs[0]!)})`;
      return { checks: [fail(`${name}.signature`, `the RIM cannot be trusted: ${why}`), fail(`${name}.chain`, 'not checked: the signature failed')] };
    }
    signedXml = signed.getSignedReferences()[0]!;
  } catch (err) {
    return { checks: [fail(`${name}.signature`, `the RIM cannot be read: ${describeGpuEvidenceError(err)}`)] };
  }

  let body: ReturnType<typeof readMeasurements>;
  let board: VbiosBoard | null = null;
  let schema: Check;
  try {
    const signedRoot = parse(signedXml, 'the signed part of the RIM');
    const problems = rimSchemaProblems(signedRoot);
    if (problems.length > 0) {
      return {
        checks: [
          pass(`${name}.signature`, `the RIM is signed as a whole by ${commonName(certs[0]!)}, the key named in it`),
          fail(`${name}.schema`, `the RIM is not a well-formed SWID reference manifest, so none of its fields is trusted: ${problems.join('; ')}`),
        ],
      };
    }
    schema = pass(
      `${name}.schema`,
      'the RIM has the SWID structure (ISO/IEC 19770-2:2015) NVIDIA uses: a named tag with a tag creator, one Meta, one Payload of Measurement resources, each attribute of its type',
    );
    body = readMeasurements(signedRoot);
    board = id === null ? null : vbiosBoard(id);
    if (board !== null && board.version !== body.version.replace(/\./g, '').toUpperCase()) {
      throw new GpuEvidenceError('ERR_RIM_MALFORMED', `the RIM service id ${id} names VBIOS ${board.version}, but the RIM describes ${body.version}`);
    }
  } catch (err) {
    return { checks: [fail(`${name}.signature`, `the signed RIM cannot be read: ${describeGpuEvidenceError(err)}`)] };
  }
  const kind = VBIOS_VERSION.test(body.version) ? 'vbios' : 'driver';
  const label = `${kind === 'vbios' ? 'VBIOS' : 'driver'} RIM ${body.version} (${body.product})`;
  const checks = [
    pass(`${name}.signature`, `the ${label} is signed as a whole (ECDSA P-384, SHA-384) by ${commonName(certs[0]!)}, the key named in it`),
    schema,
  ];
  const trusted = options.roots.map((pem) => new X509Certificate(pem));
  const problem = chainProblem(certs, trusted, at);
  if (problem !== null) {
    checks.push(fail(`${name}.chain`, `the ${label}'s signer does not chain to NVIDIA's RIM root at ${at.toISOString()}: ${problem}`));
    return { checks };
  }
  checks.push(
    pass(
      `${name}.chain`,
      `${certs.map(commonName).join(' <- ')}: each certificate signed by the next and valid at ${at.toISOString()}, ending at a trusted RIM root`,
    ),
  );
  const revocation = revocationCheck(`${name}.revocation`, `${label}'s signing chain`, certs, { ...options, at });
  checks.push(revocation);
  // A RIM whose signer is revoked (or whose revocation the auditor required and nobody answered) describes nothing.
  if (!revocation.ok && revocation.waived === undefined) return { checks };
  return { checks, rim: { label, kind, signer: commonName(certs[0]!), id, board, ...body } };
}
