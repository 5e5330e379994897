"""The named statements every dialect's queries.sql defines, each with its one contract.

Parameters are named as in the contract. `moves` is a JSON object {from_status: to_status}
from core.states.TRANSITIONS: a move applies only where the row's status is a key of it. Lists
(ids, tenants, keys, queues) arrive however the dialect passes lists (an array, JSON text...);
a `batch` is a store.driver.Rows, a JSON array of objects the dialect reads as a table.
"Returns" names the columns of the rows a statement gives back; "changes" statements give back
how many rows they changed (Connection.run). A unit test holds every dialect to this list.

A job that ended may be in the history table (duetime_jobs_done, migration 25;
docs/history-plan.md) rather than the jobs table: "the job", "the jobs" mean either table's,
except in sequence_keys_of, unstarted_parents and ended_parents, which read the jobs table
only. Each reaches jobs that its own transaction has just moved, and only a worker's finish
moves a job out of the jobs table, within finish_jobs, on PostgreSQL alone (docs/history-plan.md
step 8): so job_limits, keep_results and tell_children, which follow it, reach both tables
there and the jobs table only elsewhere. transition moves a job
of the jobs table only: a replay or dismissal of a job in the history table brings it back
first (restore_job).
jobs_by_keys, job_by_unique and clear_unique reach the jobs table only too: a job with a key
never leaves it (finish_jobs; docs/history-plan.md, step 5).
"""

from __future__ import annotations

STATEMENTS: dict[str, str] = {
    # -- schema
    "migrations_table_exists": "a row when duetime_migrations exists, none otherwise",
    "create_migrations_table": "creates duetime_migrations (version, name, applied_at) if absent",
    "lock_migrations": "makes concurrent migrators take turns until unlock_migrations",
    "unlock_migrations": "releases what lock_migrations took, where it outlives a transaction",
    "schema_version": "returns version: the newest applied (0 when none)",
    "insert_migration": "records migration (version, name) applied at now",
    # -- jobs
    "reserve_attempt_ids": "returns first_id: the first of `count` consecutive attempt ids "
    "never given out before, reserved in a transaction of their own for this process's claims "
    "(store/sql/attempt_ids.py); NULL where the claim gives attempt ids itself",
    "reserve_job_ids": "returns ids: `count` new job ids, never given out before, in one "
    "row (an array, or a JSON array as text)",
    "enqueue_one": "inserts one job, its id given by the database, and returns its id; returns "
    "nothing when (tenant, idempotency_key) or (schedule_id, nominal_at) exists already. Where "
    "the dialect has a wake-up feed (PostgreSQL), it also sends `wake` (Driver.wake_payload) "
    "when the job is inserted, in the same statement",
    "insert_job": "inserts one job with the given id; does nothing when (tenant, "
    "idempotency_key) or (schedule_id, nominal_at) exists already",
    "insert_new_jobs": "inserts many jobs that cannot meet a unique key (no idempotency key, "
    "no occurrence), one parameter set each, as fast as the dialect can (PostgreSQL: COPY)",
    "insert_job_batch": "inserts many jobs without idempotency key or occurrence that share "
    "every column but id, args, due_at and business_key: those of insert_job as parameters, and "
    "`rows`, a JSON array of [id, args, due_at as Driver.json_time or null for the shared "
    "due_at, business_key] as Driver.job_batch writes it (args as JSON text, or on PostgreSQL "
    "as the JSON object itself). Where the driver numbers jobs (Driver.numbers_jobs), each row "
    "has no id: the statement gives each job a new id, never given out before, and returns "
    "ids, the new ids in the rows' order, in one row (as reserve_job_ids); "
    "elsewhere it returns nothing. Where the dialect has a wake-up feed "
    "(PostgreSQL), it also sends `wake` (Driver.wake_payload) when not null, in the same "
    "statement",
    "jobs_by_ids": "returns the jobs whose id is in ids",
    "jobs_by_keys": "returns the jobs with an idempotency key, whose tenant is in tenants "
    "and whose key is in keys",
    "select_job": "returns the job `id` (only when of `tenant`, if tenant is not null)",
    "select_attempts": "returns the attempts of job `id`, by generation",
    "select_attempts_of_jobs": "returns the attempts of the jobs in ids, by job and generation",
    "list_jobs": "returns jobs matching the filter's parameters, newest id first, up to limit",
    "occurrence_id": "returns id: the job of (schedule_id, nominal_at)",
    # -- the worker's path
    "claim": "takes up to `limit` scheduled jobs due at now and not past their deadline, of "
    "`queues` (of any queue when all_queues) and of `tasks` (of any task when all_tasks), by "
    "priority desc, due_at, id, of the priority classes of `classes` where the dialect takes "
    "them (Driver.names_classes: every class due_class_bounds and due_class_after read), "
    "due at or after `floor` where the dialect takes one (NULL: any; ClaimPlan.floor; "
    "`known`, the classes its seeks take without a seek where the dialect takes it: a hint "
    "that changes nothing taken, Claimer.known_classes), "
    "skipping rows another transaction locked, and not of `outbox_queues` (none when "
    "all_direct); moves "
    "each by `moves` with generation + 1, attempts + 1 and a fresh random positive claim_token, "
    "and starts a running attempt of that generation and claim_token for worker_id on the job's "
    "row (migration 22: attempt_id a new attempt id, from first_attempt_id on in job id order "
    "where the dialect reserves them (store/sql/attempt_ids.py), worker_id, started_at now, "
    "lease_expires_at now + lease_seconds; the attempt's due_at is the job's; no attempt row); "
    "returns, as the claim left them (updated_at now), the job's columns that "
    "store/rows.py CLAIMED_COLUMNS names and no others (the part claimed_columns of "
    "store/sql/parts.sql), "
    "with its attempt's id and lease end as attempt_id "
    "and attempt_lease_expires_at (the rest of the attempt is the job's or the claim's) and "
    "the database's epoch as claim_epoch (PostgreSQL: its timeline; else 0), in the same order",
    "due_class_bounds": "returns top_class, end_class: the first and the last priority class of "
    "the scheduled jobs in claim order, as the dialect's claim-order index keeps them "
    "(priority; MariaDB/MySQL: neg_priority), NULL when none is scheduled; a seek each",
    "due_class_after": "returns class: the next priority class of the scheduled jobs after "
    "`after` in claim order (as due_class_bounds gives them), NULL when none; one seek",
    "claim_queues": "as claim, for a worker of 1 to 4 distinct named queues (all_queues false; "
    "sql/shared.claim_statement): reads the due jobs of those queues only, through each queue's "
    "claim-order index (claim itself may walk every due job, filtered: the fastest plan for all "
    "queues)",
    "renew_leases": "changes: the running attempts of `leases` (job_id, claim_token), each "
    "while its job holds that claim token, get a lease until now + their job's lease_seconds "
    "(on their jobs' rows, locked in id order; no attempt row is written)",
    "lease_states": "returns attempt_id, job_id, generation, claim_token, lease_expires_at, "
    "job_status of the running attempts of `leases` (job_id, claim_token) whose job holds that "
    "claim token",
    "lock_jobs": "returns id, generation, claim_token, status, queue, has_children of the jobs "
    "in ids, their "
    "rows locked for the transaction in id order, with attempt_status ('running' while the "
    "job, running or cancel_requested, runs its attempt on its row; else NULL) and "
    "attempt_lease_expires_at",
    "finish_jobs": "changes: each job of `batch` (job_id, generation, claim_token, from_status, "
    "to_status, due_at, only_if_expired, kept; a key left out of a row, as due_at and the error "
    "texts are where an outcome has none, reads as NULL) to to_status (and due_at when given) if "
    "it still has that generation, claim_token and from_status (and with only_if_expired, its "
    "attempt of that claim_token is running with a lease that ended at now); inserts the row of "
    "the attempt each job that moved was running, once, from the job's row (status, "
    "error_category, error_message, error_traceback, finished_at now) and clears the job's "
    "attempt columns (migration 22), except where the dialect keeps a success on its job's row "
    "(migration 24: PostgreSQL, SQLite) and the move is `kept` (a plain success, to succeeded): "
    "then the job's attempt columns stay and no row is inserted; counts the attempts ended. With "
    "`whole`: moves every job of the batch or none (finish_held's). Returns the moved jobs' "
    "ids, where the dialect returns rows (PostgreSQL)",
    "finish_held": "changes: as finish_jobs with `whole` (the dialects of Driver.finishes_held; "
    "unused elsewhere); returns one row: moved (how many jobs moved) and follow_ups (JSON, NULL "
    "when none: [id, has_children, tenant, sequence_key, queue] of each job that moved and "
    "ended with children, has a sequence_key, or was moved to scheduled)",
    "keep_results": "changes: the job job_id, if it still has generation, claim_token and "
    "status to_status (the finish just moved it, in this transaction): its result set to "
    "`result` when that is not NULL, and when `progress` is not NULL its progress, "
    "progress_message and progress_at (now) set; counts the jobs changed",
    "record_progress": "changes: the job job_id, if it still has generation and claim_token "
    "and is running or cancel_requested: progress, progress_message and progress_at (now) "
    "set; counts the jobs changed",
    "late_reports": "records each refused outcome of `batch` (job_id, generation, claim_token, "
    "outcome) on the job's attempt of that generation and claim_token (if any), at now: its row "
    "once it ended, the job's row while it runs (its row takes the report at its end) or when "
    "it is a success kept there (migration 24; in either table)",
    "expired_leases": "returns attempt_id, job_id, generation, claim_token, status, attempts, "
    "max_attempts, retry_base, retry_cap of up to `limit` running attempts whose lease ended "
    "at now, oldest first; not an attempt still held by `holder` whose outbox event is unpublished",
    "held_leases": "returns attempt_id, job_id, generation, claim_token of the running attempts of "
    "`worker_id`, in attempt id order",
    "expire_overdue": "up to `limit` scheduled jobs whose deadline passed move by `moves`; "
    "returns id, has_children of the jobs it moved (maybe also of jobs expired at now before)",
    "transition": "changes: one job by `moves` (an operator's move); see Store.transition",
    "next_due": "returns due_at: the instants at which scheduled jobs of `queues` (of any "
    "queue when all_queues) fall due after now and up to `until`, earliest first, up to limit",
    "earliest_due": "returns due_at: the earliest instant at or before `until` at which a "
    "scheduled job of `queues` (any when all_queues) and `tasks` (any when all_tasks), not of "
    "`outbox_queues` (none when all_direct) and not past its deadline at `until`, is due; NULL "
    "when none is",
    "prune": "changes: deletes up to `limit` succeeded, cancelled or expired jobs of the jobs "
    "table last updated before `before`, oldest first, with their attempts, dependency links "
    "and outbox events; their ticks keep no job id",
    "prune_done": "changes: what prune does, on the history table",
    # -- schedules
    "insert_schedule": "changes: inserts a schedule unless (tenant, name) exists",
    "select_schedule": "returns the schedule (tenant, name)",
    "lock_schedule": "returns the schedule (tenant, name), its row locked for the transaction",
    "list_schedules": "returns schedules of `tenant` (all when null) by name in code-point order",
    "due_schedules": "returns id: up to `limit` unpaused schedules whose cursor is at or before "
    "now, by cursor",
    "lock_due_schedule": "returns schedule `id` if still due, locked; none when another "
    "transaction holds it",
    "update_schedule": "updates a schedule's definition, paused, anchor and cursor",
    "delete_schedule": "deletes schedule `id` (its ticks with it)",
    "cancel_unstarted": "changes: the schedule's scheduled or waiting jobs that never started, "
    "by `moves`",
    "active_occurrences": "returns id, nominal_at, status, generation, origin of the schedule's "
    "scheduled, waiting, running and cancel_requested jobs",
    "delete_unstarted": "deletes the schedule's tick occurrences that never started, with "
    "their dependency links; their ticks keep no job id",
    "release_waiting": "changes: per schedule with no active occurrence, its oldest waiting "
    "one by `moves`, due now; up to `limit`",
    "insert_tick": "records a tick's outcome (or replaces the same tick, outcome and origin)",
    "list_ticks": "returns a schedule's ticks, newest first, with job_status and started_at",
    "latest_run": "returns id: the schedule's newest occurrence that started",
    # -- nodes
    "upsert_node": "registers or revives a node, with the tasks it serves",
    "touch_node": "sets a node's last_seen_at and clock_offset_seconds",
    "stop_node": "marks a node stopped",
    "take_turn": "moves duty's passed_at to the database's now and its holder to holder, "
    "when passed_at is `every` seconds old or more (or ahead of now); changes no row otherwise",
    "first_turn": "inserts duty's row (passed_at now, holder) unless it exists",
    "list_nodes": "returns nodes, newest first, each with holding: the jobs it runs now",
    "database_now": "returns now: the database's current time, read when the statement runs "
    "(not when its transaction began), as the dialect returns instants",
    # -- API tokens
    "insert_token": "inserts a token",
    "select_token": "returns token `id`",
    "list_tokens": "returns tokens of `tenant` (all when null) by id",
    "revoke_token": "sets revoked_at unless set",
    "token_used": "sets last_used_at = now when it is null or before `before`",
    "token_by_hash_read": "returns the token with secret_hash",
    "insert_session": "inserts a dashboard session (its secret_hash) for token_id",
    "session_token": "returns the token of the session with secret_hash, unless it expired",
    "delete_session": "deletes the session with secret_hash",
    "delete_expired_sessions": "deletes sessions whose expires_at <= now",
    # -- queue settings and the outbox
    "queue_settings": "returns queue, dispatch, paused, concurrency, max_backlog, weight, "
    "updated_at of every queue with settings, by name in code-point order",
    "upsert_queue": "inserts queue `queue` or updates it: dispatch, paused and weight when given "
    "(not null), concurrency and max_backlog (null: no limit) when set_concurrency and "
    "set_max_backlog, the others kept (defaults for a new row); updated_at now",
    # -- flow control of queues and tenants (docs/flow-control.md)
    "tenant_settings": "returns tenant, concurrency, max_backlog, weight, updated_at of every "
    "tenant with settings, by name in code-point order",
    "upsert_tenant": "inserts tenant `tenant` or updates it, as upsert_queue does its limits",
    "lock_capped_queues": "returns queue, concurrency of the queues with a concurrency, their "
    "rows locked for the transaction in code-point order",
    "lock_capped_tenants": "returns tenant, concurrency of the tenants with a concurrency, their "
    "rows locked for the transaction in code-point order",
    "running_counts": "returns queue, tenant, n: the running attempts per queue and tenant",
    "claim_candidates": "returns id, queue, tenant, limits, attempts of up to `limit` scheduled "
    "jobs due at now "
    "and not past their deadline, of `queues` (any when all_queues) and `tasks` (any when "
    "all_tasks), not of skip_queues (unless open_queues), skip_tenants (unless open_tenants), "
    "skip_ids (unless no_skip_ids), whose limits text contains none of the strings of "
    "`blocked` nor, when attempts > 0, of `retry_blocked` (JSON arrays), of the priority "
    "classes of `classes` where the dialect takes them (as claim), due at or after `floor` "
    "where the dialect takes one (and `known`, as claim), by priority desc, due_at, id; "
    "locks nothing",
    "lower_candidates": "returns id, priority, queue, tenant, limits, attempts of up to "
    "`limit` jobs as claim_candidates (no skip_ids, no limits filters) of priority below "
    "`below`, by priority desc, due_at, id; locks nothing",
    "queue_candidates": "as claim_candidates (without the limits filters), of queue `queue` "
    "only (tenants not in skip_tenants unless open_tenants)",
    "tenant_candidates": "as claim_candidates (without the limits filters), of tenant "
    "`tenant` only (queues of `queues` unless all_queues, not in skip_queues unless "
    "open_queues)",
    "next_due_tenant": "returns tenant: the first tenant after `after` in code-point order "
    "with a scheduled job due at now (and at or after `floor` where the dialect takes one), "
    "or no row",
    "claim_chosen": "as claim, for the jobs in ids still scheduled, due at now and not past "
    "their deadline, skipping rows another transaction locked (each with a fresh claim_token, "
    "as claim); the attempts start for "
    "worker_id with a lease until now + lease_seconds when lease_seconds is not null, else "
    "now + each job's lease_seconds",
    "lock_queue_backlog": "returns max_backlog of queue `queue`, its row locked for the "
    "transaction",
    "lock_tenant_backlog": "returns max_backlog of tenant `tenant`, its row locked for the "
    "transaction",
    "queue_backlog": "returns n: the jobs of queue `queue` that are scheduled or waiting",
    "tenant_backlog": "returns n: the jobs of tenant `tenant` that are scheduled or waiting",
    "flow_counts": "returns queue, tenant, backlog (scheduled or waiting jobs), running "
    "(running or cancel_requested jobs), waiting (scheduled jobs due at now) and oldest_due_at "
    "(the least due_at of those, null when none) per queue and tenant that has any backlog or "
    "running job",
    "dispatch_outbox": "takes up to `limit` scheduled jobs due at now and not past their "
    "deadline, of unpaused queues whose dispatch is outbox, by priority desc, due_at, id, of the "
    "priority classes of `classes` where the dialect takes them (as claim), skipping "
    "locked rows; moves each by `moves` with generation + 1 and attempts + 1, starts a running "
    "attempt held by `holder` (lease until now + lease_seconds), and writes one outbox event "
    "per job (job_id, attempt_id, queue, task, generation, version, claim_token, created_at "
    "now), in that "
    "order; returns the events",
    "insert_outbox_events": "writes one outbox event (job_id, attempt_id, queue, task, "
    "generation, version, claim_token, created_at now) per attempt in attempt_ids that is "
    "running, held by "
    "`holder` and of its job's generation, the job running, in claim order (priority desc, "
    "due_at, id); returns the events written",
    "take_events": "returns up to `limit` unpublished outbox events not leased to a relay (or "
    "whose relay_until <= now, or leased to relay_id), oldest first, skipping locked rows, "
    "each now leased to "
    "relay_id until `until`",
    "mark_published": "changes: the outbox events in ids not yet published get published_at "
    "now, and the running attempts of those events still held by `holder` a lease until now + "
    "lease_seconds (their jobs' rows locked first)",
    "accept_dispatch": "changes: the attempt of job `job_id` with `claim_token`, if running "
    "with `generation` and held by `holder`, and the job holds that generation and claim_token "
    "and is running "
    "with `version` or cancel_requested, and its deadline (if any) is after now: "
    "worker_id = worker_id, started_at = now, lease until "
    "now + the job's lease_seconds (the job's row locked first)",
    "withdraw_dispatched": "changes, then returns id, queue, status, due_at of each job moved: "
    "for each job of `ids` (and, when `direct`, each job of a queue not in outbox mode) whose "
    "attempt of its generation is running and held by `holder`, and whose status is a key of "
    "`moves`: deletes that attempt and its unpublished outbox events, and moves the job by "
    "`moves` with attempts - 1 and version + 1 (the jobs' rows locked first, in id order; an "
    "attempt no longer held by `holder` under that lock is left as it is)",
    "select_claim": "returns job `job_id` with the columns of its attempt of `claim_token` as "
    "attempt_<name>, and claim_epoch as claim",
    "outbox_figures": "returns per queue: backlog (unpublished events), oldest_created_at (of "
    "the unpublished), published (events published at or after `since`)",
    "dispatched_figures": "returns queue, dispatched, oldest_dispatched_at: per queue, how many "
    "jobs' attempts of their generation are running and held by `holder` (dispatched, accepted "
    "by no worker yet) and the earliest started_at of them",
    "prune_outbox": "changes: deletes up to `limit` outbox events published before `before`, "
    "oldest first",
    # -- figures
    "job_counts": "returns status, queue, n",
    "oldest_overdue": "returns due_at: the earliest due scheduled job",
    "attempt_samples": "returns task, queue, status, error_category, due_at, started_at, "
    "finished_at of the newest attempts started since `since`, up to limit (newest start "
    "first, ties newest job first; the successes may be those that ended last)",
    # -- limits per dependency (store/sql/limits.py)
    "limit_names": "returns name of every limit, by name",
    "limit_rows": "returns every column of every limit, by name",
    "lock_limits": "returns every column of every limit, by name, their rows locked for the "
    "transaction in name order",
    "limit_running": "returns limits, running: per distinct limits text, how many running or "
    "cancel_requested jobs carrying limits have a running attempt of their generation whose "
    "lease ends after now, or that is held by `holder` with an outbox event not yet published",
    "limit_waiting": "returns limits, waiting, oldest_due_at: per distinct limits text, the "
    "scheduled jobs carrying limits that are due at now",
    "claim_pick_limited": "returns id, limits, attempts of up to `limit` scheduled jobs due at "
    "now and not past their deadline, of `queues` (any when all_queues), of `tasks` (any when "
    "all_tasks), not of outbox_queues (none when all_direct), not in `skip` (JSON array of "
    "ids), whose limits text contains none of the strings of `blocked` (JSON array) nor, when "
    "attempts > 0, of `retry_blocked` (JSON array), of the priority classes of `classes` "
    "where the dialect takes them (as claim), by priority desc, due_at, id; their rows "
    "locked, skipping rows another transaction locked",
    "save_limit_state": "sets the state columns of limit `name`: tokens, refilled_at, "
    "window_at, cur_/prev_ starts, retries, failures, successes, breaker, breaker_until",
    "lock_limits_named": "returns every column of the limits whose name is in names, their rows "
    "locked for the transaction in name order",
    "job_limits": "returns id, limits of the jobs in ids that carry limits",
    "upsert_limit": "creates limit `name` or replaces its settings (rate_count, rate_period, "
    "burst, concurrency, retry_budget, breaker_threshold, breaker_cooldown; updated_at now), "
    "keeping its state",
    "delete_limit": "changes: deletes limit `name`",
    "pause_limit": "creates limit `name` paused until `until` (updated_at now), or moves its "
    "paused_until to `until` when that is later",
    # -- dependencies (store/sql/dependencies.py)
    "lock_parents": "returns id, tenant, status, done (1 in the history table, else 0) of the "
    "jobs in ids, their rows locked for the transaction in id order in each table (a job "
    "moving between the tables meanwhile may be missed: store/sql/shared.py lock_either reads "
    "again)",
    "restore_job": "changes: moves job `id` from the history table to the jobs table, its "
    "row as it is",
    "mark_parents": "sets has_children = 1 on the jobs in ids",
    "insert_links": "inserts the links of `batch` (child_id, parent_id, outcome: the status the "
    "parent ended in, or null)",
    "set_dependency": "sets status, due_at, on_parent_failure, release_delay, cancel_reason, "
    "parents_left of each job of `batch` (id and those)",
    "ended_parents": "returns id, status of the jobs in ids with has_children = 1 that are "
    "succeeded, dead, cancelled or expired, their rows locked for the transaction in id order",
    "untold_children": "returns child_id, parent_id of the links of the parents in ids without "
    "an outcome, by child_id, parent_id",
    "lock_children": "returns id, status, queue, due_at, on_parent_failure, release_delay, "
    "has_children, parents_left of the jobs in ids, their rows locked for the transaction in id "
    "order",
    "tell_children": "sets each link of a parent of `batch` (parent_id, outcome) that has no "
    "outcome to that outcome, and has_children of those parents to null",
    "count_parents_left": "sets parents_left of each job of `batch` (id, parents_left)",
    "unblock_jobs": "changes: each job of `batch` (id, due_at) by `moves`, with that due_at",
    "cancel_blocked": "changes: each job of `batch` (id, reason) by `moves`, with cancel_reason "
    "that reason",
    "job_parents": "returns id, status of up to `limit` parents of job `id`, by id",
    "job_children": "returns id, status of up to `limit` children of job `id`, by id",
    "parent_results": "returns id, result of the parents of job `id` that are succeeded, by id",
    "unstarted_parents": "returns id of the schedule's jobs that never started (generation 0), "
    "scheduled, waiting or cancelled, with has_children = 1 (of `origin`, unless null), their "
    "rows locked for the transaction in id order",
    # -- sequences and unique windows (docs/workflows.md)
    "lock_sequence": "makes the row of sequence (tenant, sequence_key) if absent and locks it "
    "until the transaction ends (SQLite: the write lock does)",
    "drop_sequence": "deletes the row of sequence (tenant, sequence_key)",
    "sequence_busy": "returns id: a job of the sequence other than `exclude` that holds it "
    "(scheduled, running, cancel_requested, parked, dead with sequence_hold, and waiting when "
    "`waiting`), if any",
    "sequence_next": "returns id, queue, due_at: the sequence's waiting job of lowest id above "
    "`after`",
    "release_sequence_job": "changes: job `id` by `moves` (a release)",
    "rejoin_sequence": "changes: job `id`, scheduled and of a sequence, to waiting",
    "sequence_keys_of": "returns tenant, sequence_key: the sequences of the jobs whose id is "
    "in ids",
    "sequence_ahead": "returns ahead: how many jobs of the sequence with an id below `id` are "
    "not ended (or dead with sequence_hold)",
    "clear_unique": "changes: clears unique_key on the job of (tenant, unique_key) whose "
    "unique_until is at or before now",
    "job_by_unique": "returns the job of (tenant, unique_key), the newest committed",
}
