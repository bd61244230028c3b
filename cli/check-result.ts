/** One line of `connector doctor`: ✓, ✗ with a hint, or - when not checked. */
export interface CheckResult {
  readonly name: string;
  readonly status: 'pass' | 'fail' | 'skip';
  readonly detail: string;
  /** What to do about a failure (or why a check was skipped). */
  readonly hint?: string;
}
