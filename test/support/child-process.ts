import type { ChildProcess } from 'node:child_process';

/** The first IPC message of a forked process; rejects if it exits before sending one. */
export function firstMessage(child: ChildProcess): Promise<unknown> {
  return new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`exited with ${code} before saying anything`)));
  });
}
