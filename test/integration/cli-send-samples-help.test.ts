import { describe, expect, it } from 'vitest';
import { formatMinor } from '../../shared/money.ts';
import { localStackForCli, runCli } from '../support/cli.ts';
import { sandboxConversions } from '../support/sandbox.ts';

/**
 * `connector send --help` lists the built-in samples with the conversion each leaves on the
 * platform: an amount without tax and shipping (what the connector sends), not the shop's total.
 * Each row is checked against what sending it does: the sample order, then the row's sample (a full
 * refund after the partial one).
 */

const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';

const local = localStackForCli();
const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });

interface HelpRow {
  readonly platform: string;
  readonly kind: string;
  readonly topic: string;
  readonly conversion: string;
}

/** The rows of `send --help`'s sample table, with its CONVERSION column. */
async function helpRows(): Promise<HelpRow[]> {
  const help = await cli('send', '--help');
  expect(help.code).toBe(0);
  const lines = help.stdout.split('\n');
  const start = lines.findIndex((l) => /^\s+PLATFORM\s+--sample\s+TOPIC\s+WHAT/.test(l));
  const header = lines[start] ?? '';
  const column = header.indexOf('CONVERSION');
  expect(column, header).toBeGreaterThan(0);
  const rows: HelpRow[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === '') break;
    const [platform = '', kind = '', topic = ''] = line.trim().split(/\s+/);
    rows.push({ platform, kind, topic, conversion: line.slice(column).trim() });
  }
  return rows;
}

async function send(...argv: string[]): Promise<void> {
  const sent = await cli('send', ...argv);
  expect(sent.code, `${argv.join(' ')}: ${sent.stdout}${sent.stderr}`).toBe(0);
  await local.stack.waitForIdle();
}

describe('connector send --help', () => {
  it('gives every sample the conversion it leaves, as the connector makes it', async () => {
    // Prepare
    const rows = await helpRows();
    expect(rows).toHaveLength(16);
    const seen: string[] = [];
    const shown: string[] = [];
    for (const [i, row] of rows.entries()) {
      const orderId = `help-${i}`;
      // Act
      await send(row.platform, '--order-id', orderId, '--click-id', CLICK, '--ip', IP);
      if (row.kind === 'full-refund')
        await send(row.platform, '--order-id', orderId, '--sample', 'partial-refund');
      if (row.kind !== 'order') {
        const topic = row.topic === '-' ? [] : ['--topic', row.topic];
        await send(row.platform, '--order-id', orderId, '--sample', row.kind, ...topic);
      }
      const [conversion, ...more] = sandboxConversions(local.stack, orderId);
      expect(more).toHaveLength(0);
      seen.push(
        `${row.platform} ${row.kind} ${row.topic}: ${
          conversion?.status === 'refused'
            ? 'refused'
            : formatMinor(conversion?.amount ?? -1, conversion?.currency)
        }`,
      );
      // The column may say more after the amount, in parentheses.
      shown.push(`${row.platform} ${row.kind} ${row.topic}: ${row.conversion.replace(/ \(.*\)$/, '')}`);
    }
    // Assess
    expect(shown).toEqual(seen);
  });
});
