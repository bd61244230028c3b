import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import type { HttpAnswer, HttpRequest } from './types.ts';

/** The raw request behind an API Gateway HTTP API (payload 2.0) event: headers lower-cased, exact bytes. */
export function requestFromEvent(event: APIGatewayProxyEventV2): HttpRequest {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(event.headers ?? {})) {
    if (value !== undefined) headers[name.toLowerCase()] = value;
  }
  const body = event.body ?? '';
  return { headers, rawBody: Buffer.from(body, event.isBase64Encoded ? 'base64' : 'utf8') };
}

export function resultFromAnswer(answer: HttpAnswer): APIGatewayProxyStructuredResultV2 {
  return {
    statusCode: answer.status,
    headers: { 'content-type': 'application/json', ...answer.headers },
    body: JSON.stringify(answer.body),
  };
}
