import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { csvCell } from '../../cli/csv.ts';
import { formatTable, terminalJson } from '../../cli/io.ts';
import { rowProgress } from '../../cli/progress.ts';
import { reportCsv } from '../../cli/reconcile.ts';

/**
 * What the CLI prints carries values a shop or a buyer wrote (external ids, reasons, platform
 * messages). A spreadsheet must not run them as formulas, and a terminal must not obey them.
 */

describe('CSV output', () => {
  it('neutralises cells starting with = + - @ tab or CR, so a spreadsheet does not run them', () => {
    for (const dangerous of [
      '=HYPERLINK("https://evil.example","x")',
      '+1+1',
      '-2+3',
      '@SUM(A1)',
      '\tcmd',
      '\rcmd',
    ]) {
      const out = csvCell(dangerous);
      const unquoted = out.startsWith('"') ? out.slice(1) : out;
      expect({ dangerous, first: unquoted[0] }).toEqual({ dangerous, first: "'" });
    }
  });

  it('leaves ordinary values and plain negative amounts as they are', () => {
    expect(csvCell('1001')).toBe('1001');
    expect(csvCell('-12.50')).toBe('-12.50');
    expect(csvCell('a, b')).toBe('"a, b"');
    expect(csvCell('say "hi"')).toBe('"say ""hi"""');
  });

  it('reconcile --csv: an external id written by the shop as a formula arrives neutralised', () => {
    const csv = reportCsv({
      from: '2026-11-01',
      to: '2026-11-02',
      programs: ['p'],
      ledgerRecords: 1,
      platformConversions: 0,
      waitingRefunds: [],
      differences: [
        {
          kind: 'missing',
          program: 'p',
          externalId: '=cmd|" /C calc"!A0',
          detail: '@evil',
        },
      ],
    });
    const row = csv.split('\n')[1] ?? '';
    expect(row).toContain(`"'=cmd|"" /C calc""!A0"`);
    expect(row).toContain(`'@evil`);
    expect(row).not.toMatch(/(^|,)[=+@-]/);
  });
});

describe('tables', () => {
  it('strip control characters: no escape sequence or bidi override reaches the terminal', () => {
    const table = formatTable(
      ['ID', 'REASON'],
      [
        ['\u001b[2J\u001b[31m1001', 'ok\u0007\u0000\u202eevil\u009b'],
        ['a\nb', 'c\rd'],
      ],
    );
    // biome-ignore lint/suspicious/noControlCharactersInRegex: asserting their absence.
    expect(table).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    expect(table.split('\n')).toHaveLength(3);
    expect(table).toContain('[2J[31m1001');
  });
});

// biome-ignore lint/suspicious/noControlCharactersInRegex: asserting their absence.
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

describe('JSON shown on a terminal (dlq show, --json)', () => {
  it('writes bidi overrides, DEL and C1 controls as \\u escapes: readable, and the same value once parsed', () => {
    // Prepare: an order id that shows as "1001exe.pdf" where the terminal obeys U+202E
    const value = { externalId: '1001\u202efdp.exe', reason: 'a\u007fb\u009bc\u2066d\u0007e\nf', amount: 1 };
    // Act
    const text = terminalJson(value);
    // Assess
    expect(text).not.toMatch(UNSAFE);
    expect(text).toContain('"externalId": "1001\\u202efdp.exe"');
    expect(JSON.parse(text)).toEqual(value);
  });

  it('is what every command writes as JSON for a person: none prints JSON.stringify of shop data itself', () => {
    // A careless new --json would print a shop's bidi override raw: the commands' sources are read.
    const dir = fileURLToPath(new URL('../../cli/', import.meta.url));
    const pretty = readdirSync(dir)
      .filter((f) => f.endsWith('.ts') && f !== 'io.ts')
      .flatMap((f) => {
        const code = readFileSync(join(dir, f), 'utf8');
        return [...code.matchAll(/JSON\.stringify\(/g)].flatMap((m) => {
          // The call's arguments, to its closing parenthesis.
          let depth = 1;
          let end = m.index + m[0].length;
          for (; end < code.length && depth > 0; end++)
            depth += code[end] === '(' ? 1 : code[end] === ')' ? -1 : 0;
          const line = code.slice(0, m.index).split('\n').length;
          return /null,\s*2\s*,?\s*\)$/.test(code.slice(m.index, end)) ? [`${f}:${line}`] : [];
        });
      });

    expect(pretty).toEqual([]);
  });
});

describe('progress lines (dlq replay, refund --csv, backfill, accept)', () => {
  it('carry no control character or bidi override, and stay one line per row', () => {
    // Prepare
    let out = '';
    const io = {
      stdout: { write: (t: string) => (out += t) },
      stderr: { write: () => true },
      env: {},
      cwd: '.',
    };
    const progress = rowProgress(io, 1, 'replay', 'text');
    // Act
    progress.row('m-1  1001\u202efdp.exe\u001b[2J  OrderRefunded\nreplayed as m-2');
    progress.stop();
    // Assess
    expect(out).not.toMatch(UNSAFE);
    expect(out).toBe('[1/1] m-1  1001fdp.exe[2J  OrderRefunded replayed as m-2\n');
  });
});
