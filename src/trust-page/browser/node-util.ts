// The browser bundle's `util`: xml-crypto (the RIM signature verifier) wraps its deprecated helpers in util.deprecate
// at load time. The page calls none of them; here deprecate returns the function unchanged, with no warning to print.
export function deprecate<T extends (...args: never[]) => unknown>(fn: T): T {
  return fn;
}

export default { deprecate };
