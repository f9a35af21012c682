import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readAuditDirectory } from '../../src/connect/audit.ts';

describe('an audit directory read back', () => {
  it('whose receipt names evidence the directory lacks is refused with ERR_AUDIT_DIRECTORY, naming both files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-audit-'));
    mkdirSync(join(dir, 'evidence'));
    mkdirSync(join(dir, 'receipts'));
    const exchange = { path: '/v1/chat/completions', stream: false, nonce: 'n', request: '', response: '' };
    writeFileSync(join(dir, 'receipts', '0001.json'), JSON.stringify({ at: '2026-01-01T00:00:00.000Z', evidence: 'gone', ok: true, checks: [], exchange }));
    expect(() => readAuditDirectory(dir)).toThrow(
      expect.objectContaining({
        code: 'ERR_AUDIT_DIRECTORY',
        name: 'AuditDirectoryError',
        message: 'receipts/0001.json names evidence gone, which the directory does not hold',
      }),
    );
  });
});
