/** Encrypted bodies (docs/ehbp.md, "Clients"): fetching the served key config, and checking it against the attested one. */
export { fetchHpkeKeyConfig } from './service.ts';
export { hpkeBindingCheck } from './hpke-key.ts';
