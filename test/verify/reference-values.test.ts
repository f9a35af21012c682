import { readFileSync } from 'node:fs';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkMark } from '../../src/verify/check.ts';
import { readTdxQuote } from '../../src/verify/evidence/tdx-quote.ts';
import { readReferenceValues } from '../../src/verify/reference/load.ts';
import { snpReferenceChecks, tdxReferenceChecks, type TdxMeasurements } from '../../src/verify/reference/reference-checks.ts';
import { parseReferenceValues, ReferenceValuesError } from '../../src/verify/reference/reference-values.ts';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const dstack = JSON.parse(readFileSync(new URL('../vectors/tdx/dstack-quote-and-eventlog.json', import.meta.url), 'utf8')) as { quote: string };
const quote = readTdxQuote(Buffer.from(dstack.quote, 'hex'));
const measured: TdxMeasurements = {
  mrtd: hex(quote.body.mrTd),
  rtmr0: hex(quote.body.rtmr[0]),
  rtmr1: hex(quote.body.rtmr[1]),
  rtmr2: hex(quote.body.rtmr[2]),
  rtmr3: hex(quote.body.rtmr[3]),
};
const MRTD = 'fd685522ce791dfef67414614eb07d03fc07a32c5a66f36288b329dab92b724b1564c73d436ffb9ea84488c51ac5a1c5';
const RTMR1 = '2023546e7f3b9d1228e274f70c44d481162540f8452544520a796a52f06879709b81a824a26792a7822327504b0d2aee';

function parseError(text: string): ReferenceValuesError {
  try {
    parseReferenceValues(text);
  } catch (err) {
    if (err instanceof ReferenceValuesError) return err;
    throw err;
  }
  throw new Error('parsed without error');
}

describe('a reference-values file', () => {
  it('reads YAML lists and single values, keeping hex as text even when it looks like a number', () => {
    const ref = parseReferenceValues(`
tdx:
  mrtd: ${MRTD.toUpperCase()}
  rtmr1: [${RTMR1}, ${'00'.repeat(48)}]
  mr_owner: ${'0'.repeat(96)}
  min_tee_tcb_svn: 0c010400000000000000000000000000
  tcb_status: [UpToDate, SWHardeningNeeded]
snp:
  vmpl: 0
  min_tcb: { bootloader: 3, snp: 8, microcode: 115 }
  policy: { debug: false, migrate_ma: false, smt: [true, false] }
`);
    expect(ref).toEqual({
      tdx: {
        mrtd: [MRTD],
        rtmr1: [RTMR1, '00'.repeat(48)],
        mr_owner: ['0'.repeat(96)],
        min_tee_tcb_svn: '0c010400000000000000000000000000',
        tcb_status: ['UpToDate', 'SWHardeningNeeded'],
      },
      snp: { vmpl: [0], min_tcb: { bootloader: 3, snp: 8, microcode: 115 }, policy: { debug: [false], migrate_ma: [false], smt: [true, false] } },
    });
  });

  it('reads JSON too', () => {
    expect(parseReferenceValues(JSON.stringify({ snp: { vmpl: [0, 1], host_data: 'ab'.repeat(32) } }))).toEqual({
      snp: { vmpl: [0, 1], host_data: ['ab'.repeat(32)] },
    });
  });

  it('refuses an unknown key, naming it', () => {
    expect(parseError('tdx:\n  rtmr4: 00\n').message).toBe("tdx.rtmr4: unknown key (did you mean 'rtmr3'?)");
    expect(parseError('sev:\n  measurement: 00\n').key).toBe('sev');
    expect(parseError('snp:\n  min_tcb: { ucode: 1 }\n').key).toBe('snp.min_tcb.ucode');
    expect(parseError('snp:\n  policy: { abi_minor: 1 }\n').key).toBe('snp.policy.abi_minor');
  });

  it('suggests the nearest known key for a misspelt one, as sigil.yaml does', () => {
    const err = parseError(`snp:\n  measurment: ${'00'.repeat(48)}\n`);
    expect(err.key).toBe('snp.measurment');
    expect(err.message).toBe("snp.measurment: unknown key (did you mean 'measurement'?)");
    expect(parseError('sigl:\n  accept_loaded_keys: true\n').message).toBe("sigl: unknown key (did you mean 'sigil'?)");
  });

  it('lists the allowed keys when no known key is near the unknown one', () => {
    expect(parseError('gpu:\n  firmware: x\n').message).toBe('gpu.firmware: unknown key (allowed under gpu: rims, ocsp, ocsp_allow_missing)');
  });

  it('names a nested unknown key by its full path, with its suggestion', () => {
    expect(parseError('snp:\n  min_tcb: { bootloader: 3, microcod: 115 }\n').message).toBe("snp.min_tcb.microcod: unknown key (did you mean 'microcode'?)");
    expect(parseError('snp:\n  policy: { smtt: false }\n').message).toBe("snp.policy.smtt: unknown key (did you mean 'smt'?)");
  });

  it('gives an example when a value has the wrong shape', () => {
    expect(parseError('snp:\n  min_tcb: 3\n').message).toBe('snp.min_tcb: must be a mapping of keys to values, e.g. {bootloader: 3, snp: 8, microcode: 115}');
    expect(parseError('snp:\n  vmpl: { level: 0 }\n').message).toBe('snp.vmpl: must be an integer from 0 to 3, not a list or mapping, e.g. 0');
    expect(parseError(`tdx:\n  mrtd: [[${MRTD}]]\n`).message).toBe(
      'tdx.mrtd[0]: must be 96 hex digits (48 bytes), not a list or mapping, e.g. [<96 hex digits>, ...]',
    );
    expect(parseError('tdx: UpToDate\n').message).toBe('tdx: must be a mapping of keys to values, e.g. {mrtd: <96 hex digits>}');
  });

  it('refuses a hex value of the wrong length, saying the length expected and the value given', () => {
    const err = parseError(`snp:\n  host_data: ${'AB'.repeat(31)}\n`);
    expect(err.key).toBe('snp.host_data');
    expect(err.message).toBe(`snp.host_data: must be 64 hex digits (32 bytes), got "${'AB'.repeat(31)}"`);
    expect(parseError(`sigil:\n  manifest_sha384: [${'00'.repeat(48)}, ${'00'.repeat(49)}]\n`).message).toBe(
      `sigil.manifest_sha384[1]: must be 96 hex digits (48 bytes), got "${'00'.repeat(49)}"`,
    );
  });

  it('reports every problem of the file, one a line, naming the first as the key', () => {
    const err = parseError('tdx:\n  mrtd: abcd\n  tcb_status: UpToDat\n');
    expect(err.key).toBe('tdx.mrtd');
    expect(err.message).toBe(
      'tdx.mrtd: must be 96 hex digits (48 bytes), got "abcd"\n' +
        'tdx.tcb_status: unknown TCB status "UpToDat" (did you mean \'UpToDate\'?) (known: UpToDate, SWHardeningNeeded, ConfigurationNeeded, ConfigurationAndSWHardeningNeeded, OutOfDate, OutOfDateConfigurationNeeded, Revoked)',
    );
  });

  it('refuses malformed values, naming the key and the list position', () => {
    expect(parseError(`tdx:\n  mrtd: [${MRTD}, abcd]\n`).message).toBe('tdx.mrtd[1]: must be 96 hex digits (48 bytes), got "abcd"');
    expect(parseError('tdx:\n  rtmr0: []\n').message).toBe('tdx.rtmr0: an empty list accepts nothing; leave the key out to not pin it');
    expect(parseError('tdx:\n  mrtd:\n').message).toBe('tdx.mrtd: has no value');
    expect(parseError('tdx:\n  tcb_status: Fine\n').key).toBe('tdx.tcb_status');
    expect(parseError('tdx:\n  min_tee_tcb_svn: [00000000000000000000000000000000, 00000000000000000000000000000000]\n').message).toBe(
      'tdx.min_tee_tcb_svn: is a minimum: give one value, not a list',
    );
    expect(parseError('snp:\n  vmpl: 4\n').message).toBe('snp.vmpl: must be an integer from 0 to 3, got "4"');
    expect(parseError('snp:\n  policy: { smt: yes }\n').message).toBe('snp.policy.smt: must be true or false, got "yes"');
    expect(parseError('').message).toBe('the file is empty');
    expect(parseError('tdx: [1, 2\n').code).toBe('ERR_REFERENCE_VALUES');
  });

  it('refuses to accept a debuggable SEV-SNP guest', () => {
    expect(parseError('snp:\n  policy: { debug: [false, true] }\n').message).toBe(
      'snp.policy.debug: may only be false: a guest the host can debug has no confidential memory',
    );
    expect(parseError('snp:\n  policy: { debug: yes }\n').message).toBe('snp.policy.debug: must be true or false, got "yes"');
  });

  it('resolves GPU RIM paths against the folder of the file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-ref-'));
    writeFileSync(join(dir, 'ref.yaml'), 'gpu:\n  rims: [rims/driver.swidtag, /abs/vbios.swidtag]\n');
    expect(await readReferenceValues(join(dir, 'ref.yaml'))).toEqual({ gpu: { rims: [join(dir, 'rims/driver.swidtag'), '/abs/vbios.swidtag'] } });
  });
});

describe('reference checks on the dstack TDX quote', () => {
  it('pass when the pinned values are the measured ones, and list every unpinned register as not pinned', () => {
    const checks = tdxReferenceChecks(measured, parseReferenceValues(`tdx:\n  mrtd: ${MRTD}\n  rtmr1: [${'11'.repeat(48)}, ${RTMR1}]\n`));
    expect(checks.map((c) => [checkMark(c), c.name])).toEqual([
      ['PASS', 'reference.values'],
      ['PASS', 'reference.mrtd'],
      ['----', 'reference.rtmr0'],
      ['PASS', 'reference.rtmr1'],
      ['----', 'reference.rtmr2'],
      ['----', 'reference.rtmr3'],
    ]);
    expect(checks[3]!.detail).toBe(
      'RTMR1 2023546e7f3b9d12...4b0d2aee equals accepted reference value 2 of 2: the boot loader and kernel image started by the firmware is what the auditor expects',
    );
    expect(checks[2]!.detail).toBe(
      'RTMR0 f8438db36b96f85d8752ff7f24a89ec05c79ec9eda2ba732c897fb970ca429365b7471b1c054cb84f17b1c2b23ba6640 (the firmware configuration (TD HOB, ACPI tables, Secure Boot variables)) was compared with nothing: no reference value pins it',
    );
  });

  it('fail when a pinned register differs by one byte, naming the register', () => {
    const tampered = RTMR1.slice(0, -2) + 'ef';
    const checks = tdxReferenceChecks(measured, parseReferenceValues(`tdx:\n  rtmr1: ${tampered}\n`));
    const rtmr1 = checks.find((c) => c.name === 'reference.rtmr1')!;
    expect(rtmr1.ok).toBe(false);
    expect(rtmr1.detail).toBe(
      `RTMR1 ${RTMR1} is none of the 1 accepted reference value(s) (2023546e7f3b9d12...4b0d2aef): the boot loader and kernel image started by the firmware is not what the auditor expects`,
    );
  });

  it('say the code was not compared when no reference file is given', () => {
    const checks = tdxReferenceChecks(measured, undefined);
    expect(checks.every((c) => c.ok && checkMark(c) === '----')).toBe(true);
    expect(checks[0]!.detail).toBe(
      'no reference values given (--reference FILE): the code was not compared with reference values, so this proves genuine hardware but not which software runs on it',
    );
  });

  it('fail when the file pins only another TEE', () => {
    const checks = snpReferenceChecks({ measurement: '00'.repeat(48), host_data: '00'.repeat(32) }, parseReferenceValues(`tdx:\n  mrtd: ${MRTD}\n`));
    expect(checks[0]).toEqual({
      name: 'reference.values',
      ok: false,
      detail: 'the reference values pin TDX values but nothing for SEV-SNP, the TEE of this evidence: the auditor expected a different platform',
    });
  });

  it('say the code was not compared when the file pins only GPU values', () => {
    const checks = tdxReferenceChecks(measured, parseReferenceValues('gpu:\n  rims: [driver.swidtag]\n'));
    expect(checks[0]).toEqual({
      name: 'reference.values',
      ok: true,
      pinned: false,
      detail: 'the reference values pin nothing for TDX (only GPU values): the code of this confidential VM was not compared with reference values',
    });
  });
});
