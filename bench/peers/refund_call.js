// One refund POST as a payments team would write it for both Node peers
// (PROVIDER.md's contract): the operation id is the Idempotency-Key on every
// attempt, a 3 s timeout on the whole call, and a verdict on whether a failure
// is worth retrying (timeout, connection error, 5xx) or not (any other 4xx).
'use strict';

const TIMEOUT_MS = 3000;

class HttpError extends Error {
  constructor(status, retryable) {
    super(`HTTP ${status}`);
    this.status = status;
    this.retryable = retryable;
  }
}

// Resolves with the HTTP status of a 2xx; rejects otherwise. Node's fetch
// pools keep-alive connections, as a service's HTTP client would.
async function postRefund(baseUrl, operationId, attempt) {
  const res = await fetch(baseUrl + '/v1/refunds', {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      'Idempotency-Key': operationId,
      'X-Attempt': String(attempt),
    },
    body: JSON.stringify({
      operation_id: operationId,
      payment_id: 'pay_' + operationId,
      amount: 1500,
      currency: 'TWD',
    }),
    // covers the body too: a slow answer is abandoned at 3 s
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  await res.text();
  if (res.status >= 200 && res.status < 300) return res.status;
  throw new HttpError(res.status, res.status >= 500);
}

// Timeouts and connection errors (fetch's TypeError) are retried like a 5xx.
function isRetryable(err) {
  if (err instanceof HttpError) return err.retryable;
  return err.name === 'TimeoutError' || err.name === 'AbortError' || err instanceof TypeError;
}

function operationIds(prefix, n) {
  const ids = [];
  for (let i = 1; i <= n; i++) ids.push(`${prefix}-${String(i).padStart(6, '0')}`);
  return ids;
}

module.exports = { postRefund, isRetryable, operationIds, TIMEOUT_MS };
