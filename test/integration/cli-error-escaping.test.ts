import { afterAll, describe, expect, it } from 'vitest';
import { answeringServers } from '../support/answering-servers.ts';
import { emptyDir, runCli, statusOf1001 } from '../support/cli.ts';

/**
 * The CLI's last line on failure (`error: …`) quotes what a server said: the platform's own message
 * (which echoes what the request carried, values shops wrote among them), an AWS service's. Like the
 * CLI's tables and JSON, it must not hand a terminal an escape sequence or a bidi override to obey.
 */

const PROGRAM = '0123456789abcdef01234567';
// biome-ignore lint/suspicious/noControlCharactersInRegex: asserting their absence.
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

const servers = answeringServers();
afterAll(() => servers.close());

/** A server answering every request with this status, content type and body. */
function serve(status: number, contentType: string, body: string): Promise<string> {
  return servers.serve((_req, res) => {
    res.writeHead(status, { 'content-type': contentType });
    res.end(body);
  });
}

describe('the CLI’s error line', () => {
  it('shows a platform message’s control characters and bidi overrides escaped, not raw', async () => {
    // Prepare: the ledger finds nothing; the platform refuses the lookup with a message that clears
    // the screen, plants a hyperlink and reverses the text after it.
    const dynamo = await serve(200, 'application/x-amz-json-1.0', '{}');
    const message =
      'no conversion for \u001b[2J\u001b]8;;https://evil.example\u0007order\u001b]8;;\u0007 \u202eexe.pdf';
    const platform = await serve(400, 'application/json', JSON.stringify({ message }));
    const dir = emptyDir();

    try {
      // Act
      const result = await runCli(statusOf1001(PROGRAM, dynamo, platform), {
        cwd: dir.dir,
        env: { AFFILIATE_TOKEN: 'test-token', AWS_REGION: 'us-east-1' },
      });

      // Assess: it failed, quoting the message, with nothing a terminal would obey.
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/^error: .*answered 400: no conversion for /);
      expect(result.stderr).not.toMatch(UNSAFE);
      expect(result.stderr).toContain('\\u001b[2J');
    } finally {
      dir.remove();
    }
  });

  it('doctor shows the platform’s refusal of the token with its control characters escaped', async () => {
    // Prepare: the platform refuses the token with a message that rewrites the line before it.
    const message = 'token revoked\r\u001b[1A\u001b[2K✓ affiliate token  accepted';
    const platform = await serve(401, 'application/json', JSON.stringify({ message }));
    const dir = emptyDir();

    try {
      // Act
      const result = await runCli(['doctor', '--affiliate-url', platform], {
        cwd: dir.dir,
        env: { AFFILIATE_TOKEN: 'test-token', AWS_REGION: 'us-east-1' },
      });

      // Assess: the check failed, quoting the message, with nothing a terminal would obey.
      expect(result.code).toBe(1);
      expect(result.stdout).toMatch(/✗ affiliate token\s+refused by .*token revoked/);
      expect(result.stdout + result.stderr).not.toMatch(UNSAFE);
    } finally {
      dir.remove();
    }
  });
});
