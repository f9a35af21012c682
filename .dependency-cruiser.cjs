/**
 * Sigil's layers (docs/architecture.md): dependencies point downward only. `npm test` runs this
 * through test/architecture/layers.test.ts, so an upward import fails the build.
 * Type-only imports count: a type from a higher layer is still a dependency on it.
 */
const LOWER = '^src/(protocol|config|logger|metrics|tracing|auth|limits|catalogue|policy|receipts|tlog|attestation|proxy|fleet|verify|measure)/';

module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      severity: 'error',
      comment: 'Two modules that need each other are one module, or a layer is missing.',
      from: { path: '^(src|packages/engine/src)/' },
      to: { circular: true },
    },
    {
      name: 'protocol-is-the-bottom',
      severity: 'error',
      comment: 'src/protocol is shared by the server, the verifier and the browser: it imports nothing of Sigil.',
      from: { path: '^src/protocol/' },
      to: { path: '^src/', pathNot: '^src/protocol/' },
    },
    {
      name: 'verify-stands-alone',
      severity: 'error',
      comment: 'The verifier is a library clients run: it imports only itself and the protocol.',
      from: { path: '^src/verify/' },
      to: { path: '^src/', pathNot: '^src/(verify|protocol)/' },
    },
    {
      name: 'engine-stands-alone',
      severity: 'error',
      comment: 'The built-in engine (packages/engine) is a separate program: it imports only itself, never the proxy or another package.',
      from: { path: '^packages/engine/' },
      to: { path: '^(src|packages|test|bench)/', pathNot: '^packages/engine/' },
    },
    {
      name: 'proxy-runs-the-engine-package',
      severity: 'error',
      comment: "The proxy reaches the built-in engine through @sigil/engine's entry points (its package.json exports), never by a path into it.",
      from: { path: '^src/' },
      to: { path: '^packages/engine/', dependencyTypesNot: ['aliased-workspace'] },
    },
    {
      name: 'trust-page-is-a-client',
      severity: 'error',
      comment: 'The trust page runs in a browser: it may use the verifier and the protocol, never the server.',
      from: { path: '^src/trust-page/' },
      to: { path: '^src/', pathNot: '^src/(trust-page|verify|protocol)/' },
    },
    {
      name: 'client-is-a-client',
      severity: 'error',
      comment: 'The attested client runs at the caller: it may use the verifier and the protocol, never the server.',
      from: { path: '^src/client/' },
      to: { path: '^src/', pathNot: '^src/(client|verify|protocol)/' },
    },
    {
      name: 'connect-is-a-client',
      severity: 'error',
      comment: 'sigil connect runs at the caller, on the attested client: it may use the client, the verifier and the protocol, never the server.',
      from: { path: '^src/connect/' },
      to: { path: '^src/', pathNot: '^src/(connect|client|verify|protocol)/' },
    },
    {
      name: 'lower-layers-do-not-import-http',
      severity: 'error',
      comment: 'The HTTP layer composes the lower ones; they never reach up into it.',
      from: { path: LOWER },
      to: { path: '^src/(http|cli|tls|ehbp|ohttp)/' },
    },
    {
      name: 'measure-stands-alone',
      severity: 'error',
      comment: "The reference-value calculator runs on an auditor's machine: it imports only itself and the protocol.",
      from: { path: '^src/measure/' },
      to: { path: '^src/', pathNot: '^src/(measure|protocol)/' },
    },
    {
      name: 'tls-and-ehbp-sit-under-http',
      severity: 'error',
      comment: 'TLS, encrypted bodies and the Oblivious HTTP gateway are composed by the HTTP layer; they never reach up into it or the CLI.',
      from: { path: '^src/(tls|ehbp|ohttp)/' },
      to: { path: '^src/(http|cli)/' },
    },
    {
      name: 'only-cli-imports-workers',
      severity: 'error',
      comment: 'The primary and its workers compose the HTTP layer for sigil serve: only the CLI starts them.',
      from: { path: '^src/', pathNot: '^src/(cli|workers)/' },
      to: { path: '^src/workers/' },
    },
    {
      name: 'only-cli-imports-cli',
      severity: 'error',
      comment: 'The CLI is the top: nothing imports it.',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'config-and-logger-are-leaves',
      severity: 'error',
      comment: 'Configuration and logging sit under everything that reads them.',
      from: { path: '^src/(config|logger)/' },
      to: { path: '^src/', pathNot: '^src/(config|logger|protocol)/' },
    },
    { name: 'src-does-not-import-tests', severity: 'error', from: { path: '^src/' }, to: { path: '^(test|bench)/' } },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    moduleSystems: ['es6'],
    // Resolve @sigil/engine/... through its package.json exports, as Node does: to packages/engine, an aliased workspace.
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'default'] },
  },
};
