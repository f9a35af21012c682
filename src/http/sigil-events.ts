import { EventEmitter } from 'node:events';
import type { ReloadOutcome } from './reload.ts';

/** What a running Sigil tells the program that started it, so that it (a test, an embedder) waits for what happened, not for a clock. */
export interface SigilEventMap {
  /** The keys file and the catalogue were re-read (`reload()`, or a change on disk), with what was swapped in. */
  reloaded: [ReloadOutcome];
  /** The listener stopped accepting connections: shutdown began; requests in flight may still be finishing. */
  'listener-closed': [];
}

export type SigilEvents = EventEmitter<SigilEventMap>;

export function createSigilEvents(): SigilEvents {
  return new EventEmitter<SigilEventMap>();
}
