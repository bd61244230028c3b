import { describe, expect, it } from 'vitest';
import { explain, unreachableHint } from '../../cli/io.ts';
import { TransientError } from '../../shared/errors.ts';

/** A refused connection as fetch reports it: the address is on the innermost cause. */
function refused(port: number): Error {
  const socket = Object.assign(new Error(`connect ECONNREFUSED 127.0.0.1:${port}`), {
    code: 'ECONNREFUSED',
    address: '127.0.0.1',
    port,
  });
  return new TypeError('fetch failed', { cause: socket });
}

describe('a service that does not answer', () => {
  it('is told by the address tried and how to start the stack, through wrappers', () => {
    // Prepare
    const wrapped = new TransientError('conversions.list failed without an answer (ECONNREFUSED)', {
      cause: refused(4105),
    });
    // Act
    const hint = unreachableHint(wrapped, ['http://127.0.0.1:3105', 'http://127.0.0.1:4105']);
    // Assess
    expect(hint).toBe(
      'could not reach http://127.0.0.1:4105 (ECONNREFUSED). Is the local stack running? Start it with npm start, or point the command at your deployment (see --help)',
    );
    expect(explain(wrapped)).toBe('ECONNREFUSED at 127.0.0.1:4105');
  });

  it('leaves other failures alone, and shows no class name of ours', () => {
    // Act and assess
    expect(unreachableHint(new TransientError('answered 503'))).toBeUndefined();
    expect(explain(new TransientError('answered 503'))).toBe('answered 503');
  });
});
