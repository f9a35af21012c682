/**
 * Every check the verifier can report, declared once: its name, a title, what it means in plain words and
 * where docs/ explains it. The CLI, the attested client and the trust page only render these.
 *
 * To add a check: add one entry to CHECKS (a `family.*` entry covers names made at run time, such as
 * `gpu[0].chain`), write a pure function that returns `pass`/`fail`/`notPinned` with that name, and call it
 * from `verifyService` (verify-service.ts). `test/verify/check-registry.test.ts` fails for an undeclared name.
 */
export interface CheckDeclaration {
  /** The check's name, or a family `prefix.*` that covers every name starting with `prefix.`. */
  name: string;
  title: string;
  /** What passing means, for someone who is not a specialist. */
  explains: string;
  /** The section of docs/ that says what the check compares and what it stops. */
  doc: string;
}

const AUDITING = 'docs/auditing.md#4-what-each-check-means-and-what-it-stops';
const ATTESTATION = 'docs/attestation.md#what-a-verifier-checks';
const RECEIPTS = 'docs/receipts.md#how-to-verify';
const TLS = 'docs/tls.md#pinning-how-clients-tie-the-connection-to-the-enclave';
const GPU = 'docs/attestation.md#gpu-evidence';

const entry = (name: string, title: string, explains: string, doc: string): CheckDeclaration => ({ name, title, explains, doc });

export const CHECKS: readonly CheckDeclaration[] = [
  entry('attestation.document', 'Attestation document', 'The service published an attestation document this verifier can read.', ATTESTATION),
  entry('attestation.tee', 'Hardware enclave', 'The service runs in a hardware enclave (AMD SEV-SNP or Intel TDX), not on an ordinary machine.', ATTESTATION),
  entry(
    'attestation.nonce',
    'Fresh evidence',
    'The evidence answers the random challenge we sent just now, so it is not a recording of older evidence.',
    ATTESTATION,
  ),
  entry(
    'attestation.signed_nonce',
    'Fresh answer from the enclave key',
    'The random challenge we sent just now is signed by the receipt key the hardware evidence names, so the service holding that key answered us now; the evidence itself is the one made at start.',
    'docs/attestation.md#freshness-from-a-signed-nonce',
  ),
  entry(
    'attestation.report_data',
    'Evidence bound to this service',
    "The hardware signed our challenge together with the service's keys and policy, so they belong to the enclave.",
    ATTESTATION,
  ),
  entry('attestation.jwks', 'Receipt keys bound', 'The keys that sign receipts are the ones the enclave vouches for.', ATTESTATION),
  entry(
    'attestation.measurement',
    'Launch measurement',
    'The code the hardware measured at launch is the one the document and the receipts name.',
    ATTESTATION,
  ),
  entry('attestation.policy', 'Policy bound', 'The policy the service publishes (models, limits, logging) is the one the enclave vouches for.', ATTESTATION),
  entry(
    'attestation.tls_key',
    'Encrypted connection ends in the enclave',
    'The encrypted connection ends inside the enclave, so nobody on the way can read or change the traffic.',
    TLS,
  ),
  entry(
    'attestation.hpke_key',
    'Encrypted bodies',
    'Requests are sealed to a key only the enclave holds, so only the enclave can read them.',
    'docs/ehbp.md#clients',
  ),
  entry(
    'attestation.ohttp_key',
    'Oblivious HTTP gateway key',
    'The gateway key that requests sent through an Oblivious HTTP relay are sealed to is the enclave key the attestation vouches for, so neither the relay nor the operator can read what passes through it.',
    'docs/ohttp.md#checking-the-gateway-key',
  ),
  entry(
    'attestation.key_origin',
    'Keys made in the enclave',
    'Each private key (receipt, TLS, HPKE) was made inside the enclave or sealed to it, not read from a file the operator controls.',
    'docs/attestation.md#keys',
  ),
  entry(
    'attestation.events',
    'Runtime events',
    'The record of what Sigil started and reloaded is the one the enclave signed, and its last entry names the code and policy in force now.',
    'docs/attestation.md#runtime-events',
  ),
  entry(
    'attestation.manifest',
    'Measured manifest',
    'The code, runtime, configuration and catalogue the enclave measured are the audited ones you pinned.',
    'docs/attestation.md#the-manifest',
  ),
  entry(
    'evidence.report_data',
    'Evidence bound to your input',
    'The raw evidence carries the report data you expected, so it is fresh and bound to what you named.',
    'docs/auditing.md#5-raw-evidence-without-a-service',
  ),
  entry('receipt.*', 'Receipt', 'The receipt is signed by the enclave and describes exactly this request and answer.', RECEIPTS),
  entry(
    'model_receipt.*',
    'Model receipt',
    "A stream's first receipt, sent before the answer, is signed by the enclave and names the model, the code and the policy.",
    RECEIPTS,
  ),
  entry('live.*', 'Live request', 'A real request to the service returned an answer with a receipt.', RECEIPTS),
  entry('policy.model', 'Model in policy', 'The model that answered is one the published policy allows.', RECEIPTS),
  entry('reference.*', 'Reference values', 'The code running is the audited code: each measured value equals one you pinned.', AUDITING),
  entry(
    'snp.crl',
    'AMD revocation list',
    "AMD's own list of withdrawn signing keys, signed by AMD's root and current, does not name the key that vouches for this machine.",
    AUDITING,
  ),
  entry('snp.mitigation_vector', 'CPU mitigations', "AMD's firmware applies the protections against known CPU flaws that the auditor requires.", AUDITING),
  entry(
    'snp.instance',
    'Known AMD machine',
    "The report comes from one of the machines you listed (by AMD's chip id), or from a guest you named; not pinned without a list.",
    AUDITING,
  ),
  entry(
    'tdx.instance',
    'Known Intel machine',
    "The quote comes from one of the machines you listed, by the platform ids Intel wrote into the machine's certificate; not pinned without a list.",
    AUDITING,
  ),
  entry('snp.*', 'AMD SEV-SNP evidence', "AMD's signed report is genuine, current and from an enclave configured safely.", AUDITING),
  entry(
    'tdx.module_identity',
    'TDX module',
    "The TDX module that isolates the enclave was signed by Intel, and Intel's records say how up to date this version of it is.",
    AUDITING,
  ),
  entry('tdx.*', 'Intel TDX evidence', "Intel's signed quote is genuine, current and from an enclave configured safely.", AUDITING),
  entry('collateral.*', 'Intel collateral', "Intel's own records say this platform is up to date and not revoked.", AUDITING),
  entry('eventlog.*', 'Boot event log', 'The log of what booted replays to the measured registers, so its readable contents are what ran.', AUDITING),
  entry(
    'gpu.*',
    'GPU evidence',
    'Each GPU is a genuine NVIDIA GPU in confidential mode answering our challenge, running the firmware its maker published.',
    GPU,
  ),
  entry('binding.*', 'Attestation binding', 'The attestation document speaks of these keys and this challenge.', ATTESTATION),
  entry(
    'release.*',
    'Release manifest',
    'The signed release manifest comes from the expected signer, is unchanged, unexpired, not signed to stay valid for too long and not older than the release you require, so its values can be trusted as what this release must measure.',
    'docs/release.md#verifying',
  ),
  entry(
    'log.*',
    'Transparency log',
    'The receipts are in a public append-only log: its key signed the checkpoint, its tiles hash to it, it only grew since we last looked, and the witnesses we require agree.',
    'docs/log.md#verifying',
  ),
];

const exact = new Map(CHECKS.filter((c) => !c.name.endsWith('.*')).map((c) => [c.name, c]));
const families = CHECKS.filter((c) => c.name.endsWith('.*'));

/** The declaration of `name`: its own entry, else its family's; undefined for a name nobody declared. */
export function describeCheck(name: string): CheckDeclaration | undefined {
  return exact.get(name) ?? families.find((f) => name.startsWith(f.name.slice(0, -1)) || name.startsWith(`${f.name.slice(0, -2)}[`));
}
