/** An HTTP request as the edge sees it: header names lower-cased, body untouched. */
export interface HttpRequest {
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The exact bytes received: signatures are computed over these, never over re-serialized JSON. */
  readonly rawBody: Buffer;
}

/** What the edge answers: a status, a JSON body, and any headers beyond `content-type`. */
export interface HttpAnswer {
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly headers?: Record<string, string>;
}
