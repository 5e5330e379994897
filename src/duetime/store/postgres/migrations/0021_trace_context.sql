-- Trace context (PostgreSQL): the W3C trace context (traceparent, tracestate) of the enqueue
-- that made a job, as JSON text, written only when the enqueuing process traces
-- (docs/tracing.md); NULL otherwise (a nullable column without a default: no table rewrite).
-- An outbox event carries its job's, for the relay's broker message headers.
ALTER TABLE duetime_jobs ADD COLUMN trace_context text;
ALTER TABLE duetime_outbox ADD COLUMN trace_context text;
