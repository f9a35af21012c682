// esbuild for the build scripts. Its native binary is an optional dependency of esbuild, so a proxy-only
// install (`npm install --omit=optional`) drops it; the build then runs on esbuild-wasm (a dev dependency
// with no optional parts, the same version): slower, the same output.
export async function loadEsbuild() {
  const native = (await import('esbuild')).default;
  try {
    await native.transform('');
    return native;
  } catch (error) {
    if (!String(error?.message).includes('could not be found')) throw error;
    process.stderr.write("build: esbuild's native binary is not installed (an optional dependency): using esbuild-wasm\n");
    return (await import('esbuild-wasm')).default;
  }
}
