/** Cuts generated text at the first stop sequence, holding back any tail that could be the start of one. */
export class StopTextFilter {
  private held = '';
  stopped = false;

  constructor(private readonly stops: readonly string[]) {}

  /** The text safe to send now; after a stop sequence, the text before it and nothing more. */
  push(text: string): string {
    if (this.stopped) return '';
    const combined = this.held + text;
    let cut = -1;
    for (const stop of this.stops) {
      const at = combined.indexOf(stop);
      if (at !== -1 && (cut === -1 || at < cut)) cut = at;
    }
    if (cut !== -1) {
      this.stopped = true;
      this.held = '';
      return combined.slice(0, cut);
    }
    const keep = this.longestStopPrefixAtEnd(combined);
    this.held = combined.slice(combined.length - keep);
    return combined.slice(0, combined.length - keep);
  }

  flush(): string {
    const rest = this.held;
    this.held = '';
    return rest;
  }

  private longestStopPrefixAtEnd(text: string): number {
    let longest = 0;
    for (const stop of this.stops) {
      for (let length = Math.min(stop.length - 1, text.length); length > longest; length--) {
        if (text.endsWith(stop.slice(0, length))) {
          longest = length;
          break;
        }
      }
    }
    return longest;
  }
}
