// The refund job on BullMQ, configured for the shared contract: its limiter at
// 5 jobs per 1,000 ms, 10 jobs at once (concurrency), 3 s per call, 3 attempts
// with exponential backoff (1 s, then 2 s). A retryable failure (timeout,
// connection error, 5xx) is thrown and BullMQ retries it; any other 4xx is an
// UnrecoverableError (no retry). Prints one JSON line:
// {"succeeded","failed","seconds"} once every job is completed or failed.
//
// usage: node bullmq_job.js STUB_URL REFUNDS ID_PREFIX REDIS_PORT
'use strict';

const { Queue, Worker, UnrecoverableError } = require('bullmq');
const { postRefund, isRetryable, operationIds } = require('./refund_call');

const LIMITER = { max: 5, duration: 1000 };
const CONCURRENCY = 10;
const ATTEMPTS = 3;
const BACKOFF = { type: 'exponential', delay: 1000 };
const POLL_MS = 100;

async function main() {
  const [url, refunds, prefix, redisPort] = process.argv.slice(2);
  const ids = operationIds(prefix, Number(refunds));
  const connection = { host: '127.0.0.1', port: Number(redisPort), maxRetriesPerRequest: null };
  const name = 'refunds-' + prefix;

  const queue = new Queue(name, { connection });
  const worker = new Worker(
    name,
    async (job) => {
      try {
        return await postRefund(url, job.data.operationId, job.attemptsMade + 1);
      } catch (err) {
        if (isRetryable(err)) throw err;
        throw new UnrecoverableError(err.message);
      }
    },
    { connection, concurrency: CONCURRENCY, limiter: LIMITER },
  );
  worker.on('error', (err) => console.error('worker error:', err.message));
  await worker.waitUntilReady();

  const started = process.hrtime.bigint();
  // jobId = the operation id: BullMQ itself keeps one job per operation
  await queue.addBulk(
    ids.map((id) => ({
      name: 'refund',
      data: { operationId: id },
      opts: { jobId: id, attempts: ATTEMPTS, backoff: BACKOFF },
    })),
  );
  let counts;
  for (;;) {
    counts = await queue.getJobCounts('completed', 'failed');
    if (counts.completed + counts.failed >= ids.length) break;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  await worker.close();
  await queue.close();
  console.log(JSON.stringify({ succeeded: counts.completed, failed: counts.failed, seconds }));
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
