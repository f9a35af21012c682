import { BlockList, isIP } from 'node:net';

/** `10.0.0.0/8`, `2001:db8::/32` or one address: what `listen.trusted_proxies` may list. */
export function isAddressOrCidr(text: string): boolean {
  const [address = '', prefix, ...rest] = text.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  if (!/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (family === 4 ? 32 : 128);
}

/** The addresses and ranges of `list` (each valid by `isAddressOrCidr`) as one BlockList to look addresses up in. */
export function addressRanges(list: readonly string[]): BlockList {
  const ranges = new BlockList();
  for (const text of list) {
    const [address = '', prefix] = text.split('/');
    const type = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (prefix === undefined) ranges.addAddress(address, type);
    else ranges.addSubnet(address, Number(prefix), type);
  }
  return ranges;
}
