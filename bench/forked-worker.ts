/** A load process of the benchmark (a bench/*.ts file forked with tsx, pinned to the load core) that runs one job at a time over IPC. */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { LOAD_CORE, ROOT } from './peers.ts';
import { cpuMicros, pin, stopChild } from './processes.ts';

export class ForkedWorker<J, R> {
  readonly child: ChildProcess;
  constructor(file: string) {
    this.child = fork(join(ROOT, 'bench', file), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    if (this.child.pid !== undefined) pin(this.child.pid, LOAD_CORE);
  }

  run(job: J): Promise<R> {
    return new Promise((resolve, reject) => {
      const onMessage = (m: { type: string; result?: R; message?: string }) => {
        if (m.type === 'opened') return;
        this.child.off('message', onMessage);
        if (m.type === 'result') resolve(m.result!);
        else reject(new Error(m.message));
      };
      this.child.on('message', onMessage);
      this.child.send(job as object);
    });
  }

  cpu(): number {
    return this.child.pid === undefined ? 0 : cpuMicros([this.child.pid]);
  }

  stop(): Promise<void> {
    return stopChild(this.child);
  }
}
