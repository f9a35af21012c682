import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DEFAULT_TRUST_ROOTS } from '../../src/verify/evidence/trust-roots.ts';
import { ARK_GENOA, ASK_GENOA, ASVK_GENOA } from '../../src/verify/evidence/roots/amd-genoa.ts';
import { ARK_MILAN, ASK_MILAN } from '../../src/verify/evidence/roots/amd-milan.ts';
import { ARK_TURIN, ASK_TURIN, ASVK_TURIN } from '../../src/verify/evidence/roots/amd-turin.ts';
import { INTEL_SGX_ROOT_CA } from '../../src/verify/evidence/roots/intel-sgx-root-ca.ts';

const cert = (pem: string) => new X509Certificate(pem);

describe('built-in trust roots', () => {
  it.each([
    ['Milan', ARK_MILAN, '69:D0:63:B4:53:44:D2:6A:2E:94:E1:F4:21:0D:E4:9E:F5:55:30:82:87:D4:C1:74:44:5C:95:63:9A:54:0B:CD'],
    ['Genoa', ARK_GENOA, '4C:65:98:D1:9C:18:71:9C:5D:FD:4A:7D:33:5F:67:4E:5B:FE:1D:8F:80:0C:EA:2C:F2:70:C1:0D:10:3D:B2:F1'],
    ['Turin', ARK_TURIN, '1F:08:41:61:A4:4B:B6:D9:37:78:A9:04:87:7D:48:19:CA:FA:5D:05:EF:41:93:B2:DE:D9:DD:9C:73:DD:3F:6A'],
  ])('the AMD %s ARK is self-signed, named ARK-%s, with the published fingerprint', (product, pem, fingerprint) => {
    const ark = cert(pem);
    expect(ark.subject).toContain(`CN=ARK-${product}`);
    expect(ark.verify(ark.publicKey)).toBe(true);
    expect(ark.fingerprint256).toBe(fingerprint);
  });

  it.each([
    ['Milan ASK', ASK_MILAN, ARK_MILAN],
    ['Genoa ASK', ASK_GENOA, ARK_GENOA],
    ['Genoa ASVK', ASVK_GENOA, ARK_GENOA],
    ['Turin ASK', ASK_TURIN, ARK_TURIN],
    ['Turin ASVK', ASVK_TURIN, ARK_TURIN],
  ])('the %s is signed by its ARK', (_name, pem, arkPem) => {
    const child = cert(pem);
    const ark = cert(arkPem);
    expect(child.checkIssued(ark)).toBe(true);
    expect(child.verify(ark.publicKey)).toBe(true);
  });

  it('the Intel SGX Root CA is self-signed with the published fingerprint', () => {
    const root = cert(INTEL_SGX_ROOT_CA);
    expect(root.subject).toContain('CN=Intel SGX Root CA');
    expect(root.verify(root.publicKey)).toBe(true);
    expect(root.fingerprint256).toBe('44:A0:19:6B:2B:99:F8:89:B8:E1:49:E9:5B:80:7A:35:0E:74:24:96:43:99:E8:85:A7:CB:B8:CC:FA:B6:74:D3');
  });

  it('the defaults hold three AMD roots, six AMD signing keys (an ASK per product, an ASVK per product) and the Intel root', () => {
    expect(DEFAULT_TRUST_ROOTS.amdArks).toEqual([ARK_MILAN, ARK_GENOA, ARK_TURIN]);
    expect(DEFAULT_TRUST_ROOTS.amdIntermediates).toHaveLength(6);
    expect(DEFAULT_TRUST_ROOTS.intelRoots).toEqual([INTEL_SGX_ROOT_CA]);
  });
});
