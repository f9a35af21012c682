// `npm run lint`: typescript-eslint's recommended rules for the TypeScript tree; formatting is prettier's.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'packages/client/dist/', 'node_modules/', 'test/vectors/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  { files: ['**/*.cjs'], languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } } },
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // A verifier's `let ok = false` before the try that may set it is the fail-closed default, written on purpose.
      'no-useless-assignment': 'off',
      // A `let` a close listener reads before the request assigns it is not a constant.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
);
