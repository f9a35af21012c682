import { createHash, X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { compareWithRims, DEFAULT_GPU_TRUST_ROOTS, readSpdmMeasurementReport, verifyRim, type Rim } from '../../../src/verify/gpu/index.ts';
import { NVIDIA_DEVICE_IDENTITY_ROOT } from '../../../src/verify/gpu/roots/nvidia-device-identity.ts';
import { NVIDIA_RIM_ROOT } from '../../../src/verify/gpu/roots/nvidia-rim-root.ts';
import { nvidiaVector, realReport, rimText, VECTOR_TIME } from '../../support/gpu-fixtures.ts';

const options = { name: 'rim', roots: DEFAULT_GPU_TRUST_ROOTS.rim, at: VECTOR_TIME };

function verified(xml: string): Rim {
  const { rim, checks } = verifyRim(xml, options);
  expect(checks.filter((c) => !c.ok)).toEqual([]);
  return rim!;
}

describe("NVIDIA's signed RIMs (nvtrust samples)", () => {
  it('verifies the driver and VBIOS RIMs: XML signature by the signer they name, chain to the CoRIM root', () => {
    const driver = verifyRim(rimText('driver-rim-test.swidtag'), options);
    expect(driver.checks).toEqual([
      {
        name: 'rim.signature',
        ok: true,
        detail: 'the driver RIM 545.00 (GH100) is signed as a whole (ECDSA P-384, SHA-384) by HCC RIM L4 Signer, the key named in it',
      },
      {
        name: 'rim.schema',
        ok: true,
        detail:
          'the RIM has the SWID structure (ISO/IEC 19770-2:2015) NVIDIA uses: a named tag with a tag creator, one Meta, one Payload of Measurement resources, each attribute of its type',
      },
      {
        name: 'rim.chain',
        ok: true,
        detail:
          'HCC RIM L4 Signer <- NVIDIA Reference Value L3 GH100 001 <- NVIDIA Reference Value GH100 CA <- NVIDIA CoRIM signing Root CA: each certificate signed by the next and valid at 2024-06-01T00:00:00.000Z, ending at a trusted RIM root',
      },
      {
        name: 'rim.revocation',
        ok: true,
        pinned: false,
        detail:
          "not checked: no recorded OCSP responses were given for the driver RIM 545.00 (GH100)'s signing chain (reference values gpu.ocsp), so a revoked certificate would go unnoticed",
      },
    ]);
    expect(driver.rim).toMatchObject({ kind: 'driver', version: '545.00', product: 'GH100', signer: 'HCC RIM L4 Signer' });
    expect(driver.rim!.measurements.filter((m) => m.active).map((m) => m.index)).toEqual([7, ...Array.from({ length: 20 }, (_, i) => 21 + i)]);
    expect(driver.rim!.measurements.find((m) => m.index === 23)!.alternatives).toHaveLength(2);
    for (const name of ['vbios-rim-test.swidtag', 'vbios-rim-prod-96005E0001.swidtag'] as const) {
      expect(verified(rimText(name))).toMatchObject({ kind: 'vbios', version: '96.00.5E.00.01' });
    }
  });

  it('fails a RIM whose signer certificate has expired (the samples expired in June 2025)', () => {
    const { checks, rim } = verifyRim(rimText('driver-rim-test.swidtag'), { ...options, at: new Date('2026-01-01T00:00:00Z') });
    expect(checks.map((c) => [c.name, c.ok])).toEqual([
      ['rim.signature', true],
      ['rim.schema', true],
      ['rim.chain', false],
    ]);
    expect(checks[2]!.detail).toContain(
      'HCC RIM L4 Signer is not valid at 2026-01-01T00:00:00.000Z (valid 2023-06-27T06:10:12.000Z to 2025-06-26T06:10:12.000Z)',
    );
    expect(rim).toBeUndefined();
  });

  it('fails a RIM with one measurement changed after signing, and one with its signature value changed', () => {
    const real = rimText('driver-rim-test.swidtag');
    const changedHash = real.replace('ns2:Hash0="0e0ee161', 'ns2:Hash0="1e0ee161');
    expect(changedHash).not.toBe(real);
    let result = verifyRim(changedHash, options);
    expect(result.checks.map((c) => [c.name, c.ok])).toEqual([
      ['rim.signature', false],
      ['rim.chain', false],
    ]);
    expect(result.checks[0]!.detail).toBe(
      'the RIM cannot be trusted: the document was changed after it was signed (its SHA-384 digest differs from the signed one)',
    );
    expect(result.rim).toBeUndefined();
    const changedSignature = real.replace('<ds:SignatureValue>/BgnH', '<ds:SignatureValue>/BgnI');
    expect(changedSignature).not.toBe(real);
    result = verifyRim(changedSignature, options);
    expect(result.checks[0]).toMatchObject({ name: 'rim.signature', ok: false });
    expect(result.checks[0]!.detail).toContain('does not verify with its signer');
  });

  it('refuses what it cannot verify the same way NVIDIA does: xml:* attributes, a partial reference, not XML', () => {
    const real = rimText('driver-rim-test.swidtag');
    expect(verifyRim(real.replace('<ns0:Entity ', '<ns0:Entity xml:base="x" '), options).checks[0]!.detail).toContain('ERR_RIM_UNSUPPORTED');
    expect(verifyRim(real.replace('<ds:Reference URI="">', '<ds:Reference URI="#x">'), options).checks[0]!.detail).toContain('must cover the whole document');
    expect(verifyRim('not xml', options).checks[0]).toMatchObject({ ok: false });
    expect(verifyRim('<a/>', options).checks[0]!.detail).toContain('is not a SWID tag');
  });
});

describe('the sample RIMs against the sample report', () => {
  const blocks = readSpdmMeasurementReport(realReport()).blocks;

  it('differ at the exact indexes: the samples describe other driver and VBIOS builds', () => {
    const driver = compareWithRims(blocks, [verified(rimText('driver-rim-test.swidtag'))]);
    expect(driver.compared).toHaveLength(21);
    expect(driver.mismatches.map((m) => m.index)).toEqual([7, 21, 22, 25, 26, 27, 29, 30, 31, 32, 34, 36, 37, 39, 40]);
    expect(driver.mismatches[0]).toMatchObject({ index: 7, rim: 'driver RIM 545.00 (GH100)' });
    expect(driver.mismatches[0]!.reported!.slice(0, 16)).toBe('80161aac5e7509f0');
    expect(driver.mismatches[0]!.expected[0]!.slice(0, 16)).toBe('0e0ee161b59bf124');
    const testVbios = compareWithRims(blocks, [verified(rimText('vbios-rim-test.swidtag'))]);
    expect(testVbios.mismatches.map((m) => m.index)).toEqual([1, 2, 3, 9, 11]);
    const prodVbios = compareWithRims(blocks, [verified(rimText('vbios-rim-prod-96005E0001.swidtag'))]);
    expect(prodVbios.compared).toEqual([0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12]);
    expect(prodVbios.mismatches.map((m) => m.index)).toEqual([1, 2, 9, 11]);
    expect(driver.conflicts).toEqual([]);
  });
});

describe('the built-in NVIDIA roots', () => {
  it('are the published certificates, self-signed', () => {
    const fingerprint = (pem: string) => createHash('sha256').update(new X509Certificate(pem).raw).digest('hex');
    expect(fingerprint(NVIDIA_DEVICE_IDENTITY_ROOT)).toBe('102bf659d5419614c9d8e6aecebc80454eb26b1df6a769ac720b9a690b167b48');
    expect(fingerprint(NVIDIA_RIM_ROOT)).toBe('12977b5115acb0381179279fffeb5a8c4d264971ebb32298023a465fa41df5d1');
    expect(NVIDIA_DEVICE_IDENTITY_ROOT.trim()).toBe(nvidiaVector('nvidia-device-identity-root.pem').toString().trim());
    expect(NVIDIA_RIM_ROOT.trim()).toBe(nvidiaVector('nvidia-rim-root.pem').toString().trim());
    for (const pem of [NVIDIA_DEVICE_IDENTITY_ROOT, NVIDIA_RIM_ROOT]) {
      const cert = new X509Certificate(pem);
      expect(cert.verify(cert.publicKey)).toBe(true);
    }
  });
});
