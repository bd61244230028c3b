#!/usr/bin/env node
import { run } from '../cli/program.ts';

/** `npx connector …`: see `npx connector --help`. */
const code = await run(process.argv.slice(2));
process.exitCode = code;
// Idle keep-alive sockets (fetch, the AWS SDK) must not hold the terminal once the work is done.
setTimeout(() => process.exit(code), 200).unref();
