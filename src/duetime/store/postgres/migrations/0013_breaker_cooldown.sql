-- A circuit breaker's cool-down per limit key (docs/flow-control.md, "Circuit breaker"): how
-- many seconds the breaker, once open, holds every job carrying the key before it lets one
-- probe through. NULL: the default of 30 seconds (COOLDOWN_SECONDS).
ALTER TABLE duetime_limits ADD COLUMN breaker_cooldown double precision;
