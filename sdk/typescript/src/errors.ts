/** One field's problem in a request body, as the platform reports it. */
export interface FieldError {
  field: string;
  message: string;
}

/**
 * An answer that is not a success: the platform's problem+json (RFC 9457) with its stable
 * `code`, the HTTP `status`, the per-field `errors` of a rejected body and the `requestId`
 * to quote to support. Network failures are not PlatformErrors: they are thrown as they
 * come from `fetch`.
 */
export class PlatformError extends Error {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly errors: FieldError[];
  readonly requestId: string | undefined;
  /** Seconds the platform asked to wait (`Retry-After`), when it said. */
  readonly retryAfter: number | undefined;
  /** The whole problem document (extra members such as `allowed` or `upstreamStatus`). */
  readonly body: Record<string, unknown>;

  constructor(status: number, body: Record<string, unknown>, retryAfter?: number) {
    const code = typeof body.code === "string" ? body.code : `http_${status}`;
    const detail = typeof body.detail === "string" ? body.detail : `the platform answered ${status}`;
    super(`${code}: ${detail}`);
    this.name = "PlatformError";
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.errors = Array.isArray(body.errors) ? (body.errors as FieldError[]) : [];
    this.requestId = typeof body.requestId === "string" ? body.requestId : undefined;
    this.retryAfter = retryAfter;
    this.body = body;
  }

  /** The error a failed response carries (its body is read). */
  static async fromResponse(response: Response): Promise<PlatformError> {
    let body: Record<string, unknown> = {};
    const text = await response.text().catch(() => "");
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed && typeof parsed === "object") body = parsed as Record<string, unknown>;
    } catch {
      body = { detail: text.slice(0, 200) || `the platform answered ${response.status}` };
    }
    return new PlatformError(response.status, body, retryAfterSeconds(response.headers));
  }
}

/** `Retry-After` in seconds (delta-seconds or an HTTP date), if present and sane. */
export function retryAfterSeconds(headers: Headers): number | undefined {
  const value = headers.get("retry-after");
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - Date.now()) / 1000);
}
