/**
 * @peculiar/x509 loads tsyringe, which refuses to start without the Reflect metadata API, and the `reflect-metadata`
 * package is not a dependency here. The tests need only what tsyringe calls: a per-target, per-key store.
 */
type MetadataStore = WeakMap<object, Map<unknown, unknown>>;

const reflect = Reflect as typeof Reflect & {
  getMetadata?: (key: unknown, target: object) => unknown;
  getOwnMetadata?: (key: unknown, target: object) => unknown;
  defineMetadata?: (key: unknown, value: unknown, target: object) => void;
  metadata?: (key: unknown, value: unknown) => (target: object) => void;
};

if (typeof reflect.getMetadata !== 'function') {
  const store: MetadataStore = new WeakMap();
  const forTarget = (target: object) => {
    let map = store.get(target);
    if (map === undefined) store.set(target, (map = new Map()));
    return map;
  };
  reflect.defineMetadata = (key, value, target) => void forTarget(target).set(key, value);
  reflect.getMetadata = (key, target) => {
    for (let t: object | null = target; t !== null; t = Object.getPrototypeOf(t) as object | null) {
      const map = store.get(t);
      if (map?.has(key) === true) return map.get(key);
    }
    return undefined;
  };
  reflect.getOwnMetadata = (key, target) => store.get(target)?.get(key);
  reflect.metadata = (key, value) => (target) => reflect.defineMetadata!(key, value, target);
}

export {};
