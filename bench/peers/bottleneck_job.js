// The refund job on Bottleneck, configured for the shared contract: 5 starts/s
// (minTime 200 ms), 10 in flight (maxConcurrent), 3 s per call, at most 3
// attempts with exponential backoff, retried the way Bottleneck's README
// shows: the 'failed' event returns how long to wait before the job runs
// again. Prints one JSON line: {"succeeded","failed","seconds"}.
//
// usage: node bottleneck_job.js STUB_URL REFUNDS ID_PREFIX
'use strict';

const Bottleneck = require('bottleneck');
const { postRefund, isRetryable, operationIds } = require('./refund_call');

const MIN_TIME_MS = 200; // 1 / (5 starts/s)
const MAX_CONCURRENT = 10;
const ATTEMPTS = 3;
const BACKOFF_MS = 1000; // 1 s, then 2 s

async function main() {
  const [url, refunds, prefix] = process.argv.slice(2);
  const ids = operationIds(prefix, Number(refunds));
  const limiter = new Bottleneck({ minTime: MIN_TIME_MS, maxConcurrent: MAX_CONCURRENT });

  // Bottleneck's README: a retried job does not go back through the queue and
  // "the number of milliseconds to wait ignores your minTime settings".
  limiter.on('failed', (error, jobInfo) => {
    if (isRetryable(error) && jobInfo.retryCount < ATTEMPTS - 1) {
      return BACKOFF_MS * 2 ** jobInfo.retryCount;
    }
    return undefined; // no retry: the job's promise rejects
  });

  const started = process.hrtime.bigint();
  const results = await Promise.allSettled(
    ids.map((id) => {
      let attempt = 0;
      return limiter.schedule({ id }, () => postRefund(url, id, ++attempt));
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const succeeded = results.filter((r) => r.status === 'fulfilled').length;
  console.log(JSON.stringify({ succeeded, failed: results.length - succeeded, seconds }));
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
