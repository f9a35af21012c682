import { describe, expect, it } from 'vitest';
import { parseRequestTarget } from '../../src/http/request-target.ts';

const parts = (raw: string) => {
  const target = parseRequestTarget(raw);
  return { pathname: target.pathname, query: [...target.searchParams] };
};

describe('a request target as the routes read it', () => {
  it('splits origin form into the path and the query', () => {
    expect(parts('/v1/models')).toEqual({ pathname: '/v1/models', query: [] });
    expect(parts('/v1/verify/attestation?nonce=ab&proof=signature')).toEqual({
      pathname: '/v1/verify/attestation',
      query: [
        ['nonce', 'ab'],
        ['proof', 'signature'],
      ],
    });
  });

  it('keeps only the path of an absolute-form target, whatever the scheme case', () => {
    expect(parts('http://sigil.example/v1/models?x=1')).toEqual({ pathname: '/v1/models', query: [['x', '1']] });
    expect(parts('HTTPS://sigil.example')).toEqual({ pathname: '/', query: [] });
  });

  it('reads odd targets as paths, never as hosts, and does not normalise them', () => {
    expect(parts('//:/v1')).toEqual({ pathname: '//:/v1', query: [] });
    expect(parts('//evil.example/v1/models')).toEqual({ pathname: '//evil.example/v1/models', query: [] });
    expect(parts('/v1/../healthz')).toEqual({ pathname: '/v1/../healthz', query: [] });
    expect(parts('?a=b')).toEqual({ pathname: '/', query: [['a', 'b']] });
    expect(parts('')).toEqual({ pathname: '/', query: [] });
  });

  it('gives each request its own query: one changed does not change the next', () => {
    const first = parseRequestTarget('/v1/models');
    first.searchParams.set('x', '1');
    expect([...parseRequestTarget('/v1/models').searchParams]).toEqual([]);
  });
});
