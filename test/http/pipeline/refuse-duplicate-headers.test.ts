import { describe, expect, it } from 'vitest';
import { refuseDuplicateHeaders } from '../../../src/http/pipeline/refuse-duplicate-headers.ts';
import { brandHeaders } from '../../../src/protocol/brand-headers.ts';
import { HttpError } from '../../../src/protocol/errors.ts';

const brand = brandHeaders('Acme');

/** The headers as a request's `rawHeaders` lists them: name, value, name, value..., each copy apart. */
function refusal(headers: NodeJS.Dict<string[]>): Pick<HttpError, 'status' | 'code' | 'param' | 'message'> | undefined {
  const raw = Object.entries(headers).flatMap(([name, values]) => values!.flatMap((value) => [name, value]));
  try {
    refuseDuplicateHeaders(raw, brand);
    return undefined;
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    return { status: err.status, code: err.code, param: err.param, message: err.message };
  }
}

describe('the refuse-duplicate-headers step', () => {
  it('lets each header through once, and others (accept, cookie) as often as they come', () => {
    expect(
      refusal({
        authorization: ['Bearer a'],
        host: ['x'],
        'content-type': ['application/json'],
        'x-acme-receipt': ['true'],
        'x-acme-nonce': ['n'],
        accept: ['a', 'b'],
        cookie: ['c=1', 'd=2'],
      }),
    ).toBeUndefined();
  });

  it.each([
    ['authorization', ['Bearer a', 'Bearer b']],
    ['host', ['x', 'y']],
    ['content-type', ['application/json', 'text/plain']],
    ['x-acme-receipt', ['true', 'false']],
    ['x-acme-nonce', ['n1', 'n2']],
  ])('refuses %s sent twice with 400 duplicate_header naming it', (name, values) => {
    expect(refusal({ host: ['x'], [name]: values })).toEqual({
      status: 400,
      code: 'duplicate_header',
      param: name,
      message: `The ${name} header must be sent once.`,
    });
  });

  it('matches names whatever their case, as HTTP does', () => {
    expect(refusal({ Authorization: ['Bearer a'], AUTHORIZATION: ['Bearer b'] })?.param).toBe('authorization');
    expect(refusal({ 'X-Acme-Nonce': ['n1'], 'x-acme-NONCE': ['n2'] })?.param).toBe('x-acme-nonce');
  });

  it("follows the brand: another brand's receipt header is not one of them", () => {
    expect(refusal({ 'x-service-receipt': ['true', 'false'] })).toBeUndefined();
  });
});
