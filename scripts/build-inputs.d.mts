/** What `npm run build` reads (scripts/build-inputs.mjs). */
export declare const BUILD_INPUTS: readonly string[];
